// The sync contract under load, through the Swift API: submission order holds for any mix
// of async and sync (also on a busy queue and through a target chain); the closure runs on
// the caller's thread even when the caller had to wait; queues the caller holds stay
// current inside; nesting has no depth limit; the main thread is on the main queue.

import Glibc
import GrandCentral
import XCTest

final class SyncContractTests: XCTestCase {

    /// Keeps `queue` busy with small items from a plain thread until stopped.
    final class Busy: @unchecked Sendable {
        let stop = Flag()
        let outstanding = Counter()
        let ran = Counter()
        var thread: TestThread?

        init(_ queue: DispatchQueue) {
            thread = TestThread { [self] in
                while !self.stop.isOpen {
                    if self.outstanding.value - self.ran.value >= 64 {
                        sched_yield()
                        continue
                    }
                    _ = self.outstanding.increment()
                    queue.async {
                        spin(microseconds: 1)
                        _ = self.ran.increment()
                    }
                }
            }
        }

        func finish(_ queue: DispatchQueue) {
            stop.open()
            thread?.join()
            queue.sync(flags: .barrier) {}
        }
    }

    private func alternate(_ queue: DispatchQueue, barrier: Bool, rounds: Int) -> (violations: Int, appended: Int) {
        let appended = Unprotected(0)
        let violations = Unprotected(0)
        let flags: DispatchWorkItemFlags = barrier ? .barrier : []
        for i in 0..<rounds {
            queue.async(flags: flags) {
                if appended.value != i { violations.value += 1 }
                appended.value = i + 1
            }
            queue.sync(flags: flags) {
                if appended.value != i + 1 { violations.value += 1 }
            }
        }
        return queue.sync(flags: .barrier) { (violations.value, appended.value) }
    }

    func testAsyncThenSyncKeepSubmissionOrderOnAnIdleQueue() {
        let queue = DispatchQueue(label: "test.contract.order.idle")
        let result = alternate(queue, barrier: false, rounds: 50_000)
        XCTAssertEqual(result.violations, 0, "a sync overtook an earlier async")
        XCTAssertEqual(result.appended, 50_000)
    }

    func testAsyncThenSyncKeepSubmissionOrderOnABusyQueue() {
        let queue = DispatchQueue(label: "test.contract.order.busy")
        let busy = Busy(queue)
        let result = alternate(queue, barrier: false, rounds: 50_000)
        busy.finish(queue)
        XCTAssertEqual(result.violations, 0, "a sync overtook an earlier async")
        XCTAssertGreaterThan(busy.ran.value, 0)
    }

    func testAsyncThenSyncKeepSubmissionOrderThroughABusyTarget() {
        let target = DispatchQueue(label: "test.contract.order.target")
        let queue = DispatchQueue(label: "test.contract.order.inner", target: target)
        let busy = Busy(target)
        let result = alternate(queue, barrier: false, rounds: 50_000)
        busy.finish(target)
        XCTAssertEqual(result.violations, 0, "a sync overtook an earlier async")
    }

    func testBarrierAsyncThenBarrierSyncKeepOrderOnABusyConcurrentQueue() {
        let queue = DispatchQueue(label: "test.contract.order.concurrent", attributes: .concurrent)
        let busy = Busy(queue)
        let result = alternate(queue, barrier: true, rounds: 50_000)
        busy.finish(queue)
        XCTAssertEqual(result.violations, 0, "a barrier sync overtook an earlier barrier async")
    }

    func testSyncRunsOnTheCallersThreadWhenItHadToWait() {
        let serial = DispatchQueue(label: "test.contract.thread.serial")
        let concurrent = DispatchQueue(label: "test.contract.thread.concurrent", attributes: .concurrent)
        let target = DispatchQueue(label: "test.contract.thread.target")
        let inner = DispatchQueue(label: "test.contract.thread.inner", target: target)
        let me = currentThread()
        for _ in 0..<5 {
            serial.async { sleep(milliseconds: 20) }
            XCTAssertNotEqual(serial.sync { pthread_equal(currentThread(), me) }, 0)

            concurrent.async(flags: .barrier) { sleep(milliseconds: 20) }
            XCTAssertNotEqual(concurrent.sync { pthread_equal(currentThread(), me) }, 0)

            concurrent.async { sleep(milliseconds: 20) }
            XCTAssertNotEqual(concurrent.sync(flags: .barrier) { () -> Int32 in
                dispatchPrecondition(condition: .onQueueAsBarrier(concurrent))
                return pthread_equal(currentThread(), me)
            }, 0)

            target.async { sleep(milliseconds: 20) }
            XCTAssertNotEqual(inner.sync { () -> Int32 in
                dispatchPrecondition(condition: .onQueue(inner))
                dispatchPrecondition(condition: .onQueue(target))
                return pthread_equal(currentThread(), me)
            }, 0)
        }
    }

    func testQueuesTheCallerHoldsStayCurrentInsideASyncThatWaited() {
        let outer = DispatchQueue(label: "test.contract.held.outer")
        let busy = DispatchQueue(label: "test.contract.held.busy")
        let done = Flag()
        outer.async {
            busy.async { sleep(milliseconds: 20) }
            busy.sync {
                dispatchPrecondition(condition: .onQueue(busy))
                dispatchPrecondition(condition: .onQueue(outer))
            }
            done.open()
        }
        XCTAssertTrue(done.wait())
    }

    func testAThousandNestedSyncsEachSeeTheirQueues() {
        let key = DispatchSpecificKey<Int>()
        let queues = (0..<1000).map { i -> DispatchQueue in
            let q = DispatchQueue(label: "test.contract.nest.\(i)")
            q.setSpecific(key: key, value: i)
            return q
        }
        var deepest = -1
        func descend(_ depth: Int) {
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), depth)
            if depth + 1 < queues.count {
                queues[depth + 1].sync { descend(depth + 1) }
            } else {
                deepest = depth
                for q in queues { dispatchPrecondition(condition: .onQueue(q)) }
            }
        }
        queues[0].sync { descend(0) }
        XCTAssertEqual(deepest, 999)
        XCTAssertNil(DispatchQueue.getSpecific(key: key))
    }

    func testTheMainThreadIsOnTheMainQueueInsideASync() throws {
        guard kernelThreadID() == getpid() else { throw XCTSkip("XCTest is not running this test on the main thread") }
        let queue = DispatchQueue(label: "test.contract.main")
        dispatchPrecondition(condition: .onQueue(.main))
        queue.sync { dispatchPrecondition(condition: .onQueue(.main)) }
        queue.async { sleep(milliseconds: 20) }
        queue.sync {
            dispatchPrecondition(condition: .onQueue(.main))
            dispatchPrecondition(condition: .onQueue(queue))
        }
    }
}

/// gettid(2) (which Glibc's Swift module does not expose), from /proc/thread-self → "<pid>/task/<tid>".
private func kernelThreadID() -> Int32 {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, 63)
    guard n > 0 else { return -1 }
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return Int32(link.split(separator: "/").last ?? "") ?? -1
}
