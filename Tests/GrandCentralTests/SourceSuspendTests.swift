// A DispatchSourceTimer whose handler suspends its own queue (or the queue above it): no
// handler runs until the queue is resumed, however many fires pile up meanwhile, and the
// fires missed while suspended arrive counted in the timer's data with the next call. The
// handler takes longer than the interval, so fires are always waiting when it returns.
// (ctests/source_suspend.c checks the same through the C API, for more source types.)

import Glibc
import GrandCentral
import Synchronization
import XCTest

/// Set by whoever suspends, cleared just before the resume; a handler that finds it set
/// ran on a suspended queue.
private final class SuspendProbe: Sendable {
    private let suspended = Atomic<Bool>(false)
    private let violationCount = Atomic<Int>(0)
    private let largest = Atomic<UInt>(0)
    private let smallest = Atomic<UInt>(.max)

    func handlerStarted(data: UInt) {
        if suspended.load(ordering: .sequentiallyConsistent) {
            violationCount.wrappingAdd(1, ordering: .sequentiallyConsistent)
        }
        var seen = largest.load(ordering: .relaxed)
        while data > seen { (_, seen) = largest.compareExchange(expected: seen, desired: data, ordering: .relaxed) }
        seen = smallest.load(ordering: .relaxed)
        while data < seen { (_, seen) = smallest.compareExchange(expected: seen, desired: data, ordering: .relaxed) }
    }

    func markSuspended() { suspended.store(true, ordering: .sequentiallyConsistent) }
    func markResuming() { suspended.store(false, ordering: .sequentiallyConsistent) }
    var violations: Int { violationCount.load(ordering: .sequentiallyConsistent) }
    var largestData: UInt { largest.load(ordering: .relaxed) }
    var smallestData: UInt { smallest.load(ordering: .relaxed) }
}

final class SourceSuspendTests: XCTestCase {
    private let rounds = 200

    /// The timer targets `target`; its handler suspends `suspendee` (the target itself, or
    /// the queue the target targets) every time; the test resumes it a millisecond later.
    private func runTimerSuspending(target: DispatchQueue, suspendee: DispatchQueue,
                                    file: StaticString = #filePath, line: UInt = #line) {
        let timer = DispatchSource.makeTimerSource(queue: target)
        let probe = SuspendProbe()
        let calls = Counter()
        timer.setEventHandler {
            probe.handlerStarted(data: timer.data)
            spin(microseconds: 300)  // longer than the interval: fires wait when it returns
            probe.markSuspended()
            suspendee.suspend()
            calls.increment()
        }
        let cancelled = Flag()
        timer.setCancelHandler { cancelled.open() }
        timer.schedule(deadline: .now(), repeating: .microseconds(200))
        timer.activate()
        for round in 0..<rounds {
            XCTAssertTrue(waitForCount(calls, toReach: round + 1), "round \(round)", file: file, line: line)
            sleep(milliseconds: 1)  // five intervals: the fires coalesce while suspended
            probe.markResuming()
            suspendee.resume()
        }
        XCTAssertTrue(waitForCount(calls, toReach: rounds + 1), file: file, line: line)
        timer.cancel()
        probe.markResuming()
        suspendee.resume()  // balanced: the queues are released unsuspended
        XCTAssertTrue(cancelled.wait(), file: file, line: line)
        XCTAssertEqual(probe.violations, 0, "handler calls while the queue was suspended", file: file, line: line)
        XCTAssertEqual(calls.value, rounds + 1, file: file, line: line)
        XCTAssertGreaterThanOrEqual(probe.smallestData, 1, file: file, line: line)
        XCTAssertGreaterThanOrEqual(probe.largestData, 2, "missed fires were never coalesced", file: file, line: line)
    }

    func testTimerWhoseHandlerSuspendsItsQueue() {
        let queue = DispatchQueue(label: "test.source-suspend.target")
        runTimerSuspending(target: queue, suspendee: queue)
    }

    func testTimerWhoseHandlerSuspendsTheQueueAboveItsTarget() {
        let top = DispatchQueue(label: "test.source-suspend.top")
        let queue = DispatchQueue(label: "test.source-suspend.target", target: top)
        runTimerSuspending(target: queue, suspendee: top)
    }
}
