// A DispatchSourceTimer whose handler suspends its own queue (or the queue above it): no
// handler runs until the queue is resumed, however many fires pile up meanwhile, and the
// fires missed while suspended arrive counted in the timer's data with the next call. The
// handler takes longer than the interval, so fires are always waiting when it returns.
// (ctests/source_suspend.c checks the same through the C API, for more source types.)
// And a data source beside a serial queue on one target that another thread suspends and
// resumes: the two kinds share one drain (QueueDrain.swift).

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

    /// A serial queue's items and a DATA_ADD source's handler share one serial target that
    /// another thread suspends and resumes: every item runs once and in order, the handler
    /// sees the whole sum, never data 0, and nothing on the target overlaps. Queues and
    /// sources share one drain (lock, budget and yield, clear-then-recheck unlock); under
    /// TSan the unsynchronized `shared` record checks that it orders both kinds' work.
    /// (ctests/source_shared_target.c: the same through the C API, 10^5 of each.)
    func testADataSourceAndASerialQueueOnOneTargetSuspendedFromOutside() {
        let items = 20_000, merges = 20_000
        let target = DispatchQueue(label: "test.shared-target")
        let queue = DispatchQueue(label: "test.shared-target.queue", target: target)
        let source = DispatchSource.makeUserDataAddSource(queue: target)
        // Touched only by work on `target`: no synchronization of the test's own.
        let shared = Unprotected((next: 0, outOfOrder: 0, sum: UInt(0), zeroData: 0))
        let inside = SharedTargetProbe()
        let itemsRan = Counter(), sumReached = Flag(), cancelled = Flag()
        source.setEventHandler {
            inside.enter()
            let data = source.data
            if data == 0 { shared.value.zeroData += 1 }
            shared.value.sum += data
            let reached = shared.value.sum == UInt(merges)
            inside.leave()
            if reached { sumReached.open() }
        }
        source.setCancelHandler { cancelled.open() }
        source.activate()
        let stop = Flag()
        let suspender = TestThread {
            while !stop.isOpen {
                target.suspend()
                spin(microseconds: 20)
                target.resume()
                spin(microseconds: 20)
            }
        }
        let merged = Unprotected(source)  // a source is safe to merge into from any thread
        let mergers = (0..<2).map { _ in
            TestThread {
                for _ in 0..<merges / 2 {
                    merged.value.add(data: 1)
                    spin(microseconds: 1)
                }
            }
        }
        for i in 0..<items {
            queue.async {
                inside.enter()
                if shared.value.next != i { shared.value.outOfOrder += 1 }
                shared.value.next = i + 1
                inside.leave()
                itemsRan.increment()
            }
            if i % 64 == 0 { spin(microseconds: 10) }
        }
        mergers.forEach { $0.join() }
        XCTAssertTrue(waitForCount(itemsRan, toReach: items))
        XCTAssertTrue(sumReached.wait(timeout: 120))
        stop.open()
        suspender.join()
        source.cancel()
        XCTAssertTrue(cancelled.wait())
        queue.sync {}  // the items' writes to `shared` happen before the reads below
        XCTAssertEqual(shared.value.next, items)
        XCTAssertEqual(shared.value.outOfOrder, 0)
        XCTAssertEqual(shared.value.sum, UInt(merges))
        XCTAssertEqual(shared.value.zeroData, 0)
        XCTAssertEqual(inside.overlaps, 0, "work on the serial target overlapped")
    }
}

/// Counts work on one serial target that started while other work on it was running.
private final class SharedTargetProbe: Sendable {
    private let busy = Atomic<Bool>(false)
    private let overlapCount = Atomic<Int>(0)

    func enter() {
        if busy.exchange(true, ordering: .relaxed) { overlapCount.wrappingAdd(1, ordering: .relaxed) }
    }
    func leave() { busy.store(false, ordering: .relaxed) }
    var overlaps: Int { overlapCount.load(ordering: .relaxed) }
}
