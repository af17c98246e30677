// sync: returns the closure's value, rethrows, runs after the items queued before it, never
// alongside another item of a serial queue, does not wait for unrelated items on a concurrent
// queue, and runs on the caller's thread when the queue is idle. Also asyncAndWait.

import Glibc
import GrandCentral
import XCTest

final class SyncTests: XCTestCase {

    func testSyncReturnsTheClosuresValue() {
        let queue = DispatchQueue(label: "test.sync.value")
        XCTAssertEqual(queue.sync { 6 * 7 }, 42)
        XCTAssertEqual(queue.sync { "grand" + "central" }, "grandcentral")
        let concurrent = DispatchQueue(label: "test.sync.value.concurrent", attributes: .concurrent)
        XCTAssertEqual(concurrent.sync { [1, 2, 3] }, [1, 2, 3])
    }

    func testSyncRethrowsAndTheQueueKeepsWorking() {
        let queue = DispatchQueue(label: "test.sync.throws")
        XCTAssertThrowsError(try queue.sync { () throws -> Int in throw TestError(code: 7) }) { error in
            XCTAssertEqual(error as? TestError, TestError(code: 7))
        }
        XCTAssertEqual(try queue.sync { () throws -> Int in 5 }, 5)
        let ran = Flag()
        queue.async { ran.open() }
        XCTAssertTrue(ran.wait(), "the queue stopped after a sync threw")
    }

    func testBarrierSyncRethrows() {
        let queue = DispatchQueue(label: "test.sync.throws.barrier", attributes: .concurrent)
        XCTAssertThrowsError(try queue.sync(flags: .barrier) { () throws -> Void in throw TestError(code: 1) })
        XCTAssertEqual(queue.sync { 1 }, 1)
    }

    func testSyncMayMutateTheCallersState() {
        let queue = DispatchQueue(label: "test.sync.nonescaping")
        var total = 0
        for i in 1...10 {
            queue.sync { total += i }
        }
        XCTAssertEqual(total, 55)
    }

    func testSyncRunsAfterEarlierItemsOnASerialQueue() {
        let queue = DispatchQueue(label: "test.sync.fifo")
        let log = Recorder<Int>()
        for i in 0..<100 {
            queue.async {
                if i % 10 == 0 { sleep(milliseconds: 1) }
                log.append(i)
            }
        }
        let seen = queue.sync { log.values }
        XCTAssertEqual(seen, Array(0..<100))
    }

    func testSyncWaitsForTheRunningItemOfASerialQueue() {
        let queue = DispatchQueue(label: "test.sync.exclusive")
        let started = Flag()
        let release = Flag()
        let syncRan = Flag()
        let releasedFirst = Flag()
        queue.async {
            started.open()
            release.wait()
        }
        XCTAssertTrue(started.wait())
        let caller = TestThread {
            queue.sync {
                if release.isOpen { releasedFirst.open() }
                syncRan.open()
            }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(syncRan.isOpen, "sync ran while another item of the serial queue was running")
        release.open()
        caller.join()
        XCTAssertTrue(syncRan.isOpen)
        XCTAssertTrue(releasedFirst.isOpen)
    }

    /// A sync on a concurrent queue runs beside an unrelated item that is still running.
    func testSyncOnAConcurrentQueueDoesNotWaitForUnrelatedItems() {
        let queue = DispatchQueue(label: "test.sync.concurrent", attributes: .concurrent)
        let started = Flag()
        let release = Flag()
        queue.async {
            started.open()
            release.wait()
        }
        XCTAssertTrue(started.wait())
        // If sync wrongly waited for the blocked item, this watchdog ends the wait so that the
        // test fails instead of hanging.
        let watchdog = TestThread {
            _ = eventually(within: 10) { release.isOpen }
            release.open()
        }
        let valueSeenWhileBlocked = queue.sync { release.isOpen ? -1 : 1 }
        release.open()
        watchdog.join()
        XCTAssertEqual(valueSeenWhileBlocked, 1, "sync waited for an unrelated item")
    }

    func testSyncOnAnIdleQueueRunsOnTheCallingThread() {
        let serial = DispatchQueue(label: "test.sync.thread")
        let concurrent = DispatchQueue(label: "test.sync.thread.concurrent", attributes: .concurrent)
        let me = currentThread()
        XCTAssertNotEqual(serial.sync { pthread_equal(currentThread(), me) }, 0)
        XCTAssertNotEqual(concurrent.sync { pthread_equal(currentThread(), me) }, 0)
        XCTAssertNotEqual(concurrent.sync(flags: .barrier) { pthread_equal(currentThread(), me) }, 0)
    }

    func testNestedSyncOnDifferentQueues() {
        let outer = DispatchQueue(label: "test.sync.outer")
        let inner = DispatchQueue(label: "test.sync.inner")
        let result = outer.sync { () -> Int in
            dispatchPrecondition(condition: .onQueue(outer))
            return inner.sync { () -> Int in
                dispatchPrecondition(condition: .onQueue(inner))
                dispatchPrecondition(condition: .onQueue(outer))
                return 3
            } + 1
        }
        XCTAssertEqual(result, 4)
    }

    func testSyncFromInsideAnItemOfAnotherQueue() {
        let first = DispatchQueue(label: "test.sync.from.item")
        let second = DispatchQueue(label: "test.sync.target.item")
        let result = Recorder<Int>()
        first.async {
            result.append(second.sync { 11 })
        }
        XCTAssertTrue(eventually { result.count == 1 })
        XCTAssertEqual(result.values, [11])
    }

    func testSyncOnASuspendedQueueWaitsUntilResumed() {
        let queue = DispatchQueue(label: "test.sync.suspended")
        let ran = Flag()
        queue.suspend()
        let caller = TestThread {
            queue.sync { ran.open() }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(ran.isOpen, "sync ran on a suspended queue")
        queue.resume()
        caller.join()
        XCTAssertTrue(ran.isOpen)
    }

    func testSyncWithAWorkItem() {
        let queue = DispatchQueue(label: "test.sync.workitem")
        let ran = Counter()
        let item = DispatchWorkItem { ran.increment() }
        queue.sync(execute: item)
        XCTAssertEqual(ran.value, 1)
    }

    /// Many threads calling sync on one serial queue are mutually excluded: the counter has no
    /// lock of its own (ThreadSanitizer checks that sync provides the ordering).
    func testSyncFromManyThreadsIsMutuallyExclusive() {
        let queue = DispatchQueue(label: "test.sync.mutex")
        let total = Unprotected(0)
        let probe = ConcurrencyProbe()
        let threads = (0..<4).map { _ in
            TestThread {
                for _ in 0..<2000 {
                    queue.sync {
                        probe.enter()
                        total.value += 1
                        probe.leave()
                    }
                }
            }
        }
        threads.forEach { $0.join() }
        XCTAssertEqual(queue.sync { total.value }, 8000)
        XCTAssertEqual(probe.peak, 1)
    }

    func testSyncAndAsyncInterleaveInSubmissionOrder() {
        let queue = DispatchQueue(label: "test.sync.interleave")
        let log = Recorder<Int>()
        for i in 0..<200 {
            if i % 3 == 0 {
                queue.sync { log.append(i) }
            } else {
                queue.async { log.append(i) }
            }
        }
        queue.sync {}
        XCTAssertEqual(log.values, Array(0..<200))
    }

#if !REFERENCE_DISPATCH
    // The toolchain's Linux Dispatch overlay has no asyncAndWait, so these run only against
    // GrandCentral. The contract (Apple's): like sync, the work has finished when the call
    // returns and it runs in the queue's order; unlike sync, it may run on a queue thread.

    func testAsyncAndWaitHasFinishedWhenItReturns() {
        let queue = DispatchQueue(label: "test.asyncandwait.done")
        let ran = Counter()
        queue.asyncAndWait { _ = ran.increment() }
        XCTAssertEqual(ran.value, 1)
    }

    func testAsyncAndWaitRunsAfterEarlierItems() {
        let queue = DispatchQueue(label: "test.asyncandwait.fifo")
        let log = Recorder<Int>()
        for i in 0..<50 {
            queue.async { log.append(i) }
        }
        queue.asyncAndWait { log.append(50) }
        XCTAssertEqual(log.values, Array(0...50))
    }

    func testAsyncAndWaitOnASuspendedQueueWaitsUntilResumed() {
        let queue = DispatchQueue(label: "test.asyncandwait.suspended")
        let ran = Flag()
        queue.suspend()
        let caller = TestThread {
            queue.asyncAndWait { ran.open() }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(ran.isOpen, "asyncAndWait ran on a suspended queue")
        queue.resume()
        caller.join()
        XCTAssertTrue(ran.isOpen)
    }

    func testAsyncAndWaitWithAWorkItem() {
        let queue = DispatchQueue(label: "test.asyncandwait.workitem", attributes: .concurrent)
        let ran = Counter()
        let item = DispatchWorkItem { ran.increment() }
        queue.asyncAndWait(execute: item)
        XCTAssertEqual(ran.value, 1)
    }
#endif
}
