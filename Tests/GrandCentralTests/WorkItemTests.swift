// DispatchWorkItem: perform runs the block on the caller's thread; wait and notify observe
// the item's completion; cancel before the item runs skips its block (its waiters and
// notifications still complete), cancel while it runs does not interrupt it.

import Glibc
import GrandCentral
import XCTest

final class WorkItemTests: XCTestCase {

    func testIsNotCancelledAtFirst() {
        let item = DispatchWorkItem {}
        XCTAssertFalse(item.isCancelled)
    }

    func testPerformRunsTheBlockOnTheCallingThread() {
        let me = currentThread()
        let sameThread = Recorder<Bool>()
        let item = DispatchWorkItem { sameThread.append(pthread_equal(currentThread(), me) != 0) }
        item.perform()
        XCTAssertEqual(sameThread.values, [true])
        XCTAssertEqual(item.wait(timeout: .now()), .success)
    }

    func testWaitReturnsAfterTheItemRanOnAQueue() {
        let done = Counter()
        let item = DispatchWorkItem {
            sleep(milliseconds: 30)
            done.increment()
        }
        DispatchQueue(label: "test.workitem.wait").async(execute: item)
        item.wait()
        XCTAssertEqual(done.value, 1)
    }

    func testWaitTimesOutBeforeTheItemRuns() {
        let queue = DispatchQueue(label: "test.workitem.timeout")
        let item = DispatchWorkItem {}
        queue.suspend()
        queue.async(execute: item)
        XCTAssertEqual(item.wait(timeout: .now() + .milliseconds(50)), .timedOut)
        queue.resume()
        XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
    }

    func testNotifyRunsOnItsQueueAfterTheItem() {
        let done = Counter()
        let seenByNotify = Recorder<Int>()
        let notifyQueue = DispatchQueue(label: "test.workitem.notify")
        let item = DispatchWorkItem {
            sleep(milliseconds: 30)
            done.increment()
        }
        item.notify(queue: notifyQueue) {
            dispatchPrecondition(condition: .onQueue(notifyQueue))
            seenByNotify.append(done.value)
        }
        DispatchQueue.global().async(execute: item)
        XCTAssertTrue(eventually { seenByNotify.count == 1 })
        XCTAssertEqual(seenByNotify.values, [1])
    }

    func testNotifyAfterPerform() {
        let log = Recorder<String>()
        let item = DispatchWorkItem { log.append("item") }
        item.notify(qos: .utility, flags: [], queue: .global()) { log.append("notify") }
        item.perform()
        XCTAssertTrue(eventually { log.count == 2 })
        XCTAssertEqual(log.values, ["item", "notify"])
    }

    func testNotifyWithAWorkItem() {
        let log = Recorder<String>()
        let item = DispatchWorkItem { log.append("item") }
        let follower = DispatchWorkItem { log.append("follower") }
        item.notify(queue: DispatchQueue(label: "test.workitem.follower"), execute: follower)
        DispatchQueue.global().async(execute: item)
        XCTAssertEqual(follower.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(log.values, ["item", "follower"])
    }

    func testCancelBeforeTheItemRunsSkipsItsBlock() {
        let queue = DispatchQueue(label: "test.workitem.cancel")
        let ran = Flag()
        let notified = Flag()
        let item = DispatchWorkItem { ran.open() }
        item.notify(queue: .global()) { notified.open() }
        queue.suspend()
        queue.async(execute: item)
        item.cancel()
        XCTAssertTrue(item.isCancelled)
        queue.resume()
        // The cancelled item still completes as far as its observers are concerned.
        XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
        XCTAssertTrue(notified.wait())
        XCTAssertFalse(ran.isOpen, "a cancelled item ran its block")
        let after = Flag()
        queue.async { after.open() }
        XCTAssertTrue(after.wait(), "the queue stopped after a cancelled item")
    }

    func testCancelledItemDoesNothingWhenPerformed() {
        let ran = Flag()
        let item = DispatchWorkItem { ran.open() }
        item.cancel()
        item.perform()
        XCTAssertFalse(ran.isOpen)
        XCTAssertTrue(item.isCancelled)
    }

    func testCancelDoesNotInterruptARunningItem() {
        let started = Flag()
        let release = Flag()
        let finished = Flag()
        let item = DispatchWorkItem {
            started.open()
            release.wait()
            finished.open()
        }
        DispatchQueue(label: "test.workitem.running").async(execute: item)
        XCTAssertTrue(started.wait())
        item.cancel()
        XCTAssertTrue(item.isCancelled)
        release.open()
        XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
        XCTAssertTrue(finished.isOpen, "cancel interrupted an item that was running")
    }

    func testCancelledAsyncAfterItemNeverRuns() {
        let queue = DispatchQueue(label: "test.workitem.after")
        let cancelledRan = Flag()
        let keptRan = Flag()
        let cancelled = DispatchWorkItem { cancelledRan.open() }
        let kept = DispatchWorkItem { keptRan.open() }
        queue.asyncAfter(deadline: .now() + .milliseconds(100), execute: cancelled)
        queue.asyncAfter(deadline: .now() + .milliseconds(150), execute: kept)
        cancelled.cancel()
        XCTAssertTrue(keptRan.wait())
        XCTAssertFalse(cancelledRan.isOpen, "a cancelled asyncAfter item ran")
    }

    func testItemWithQoSAndFlagsRuns() {
        let done = Counter()
        let items = [
            DispatchWorkItem(qos: .utility, flags: .enforceQoS) { done.increment() },
            DispatchWorkItem(qos: .userInitiated, flags: [.detached, .inheritQoS]) { done.increment() },
            DispatchWorkItem(flags: .assignCurrentContext) { done.increment() },
            DispatchWorkItem(qos: .background) { done.increment() },
        ]
        let queue = DispatchQueue(label: "test.workitem.qos", attributes: .concurrent)
        for item in items { queue.async(execute: item) }
        for item in items {
            XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
        }
        XCTAssertEqual(done.value, items.count)
    }

    func testManyItemsEachWaitedFor() {
        let queue = DispatchQueue(label: "test.workitem.many", attributes: .concurrent)
        let done = Counter()
        let items = (0..<200).map { _ in DispatchWorkItem { done.increment() } }
        for item in items { queue.async(execute: item) }
        for item in items {
            XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
        }
        XCTAssertEqual(done.value, 200)
    }

    func testBarrierNotifyRunsAloneOnAConcurrentQueue() {
        let queue = DispatchQueue(label: "test.workitem.notify.barrier", attributes: .concurrent)
        let probe = ConcurrencyProbe()
        let violations = Counter()
        let barriersDone = Counter()
        let gate = Flag()
        let item = DispatchWorkItem { _ = gate.wait() }
        for _ in 0..<4 {
            queue.async { probe.measure(spinMicroseconds: 20_000) }
        }
        item.notify(flags: .barrier, queue: queue) {
            if probe.current != 0 { _ = violations.increment() }
            sleep(milliseconds: 10)
            if probe.current != 0 { _ = violations.increment() }
            _ = barriersDone.increment()
        }
        item.notify(queue: queue, execute: DispatchWorkItem(flags: .barrier) {
            if probe.current != 0 { _ = violations.increment() }
            _ = barriersDone.increment()
        })
        DispatchQueue.global().async(execute: item)
        // The notifications are submitted while plain items run: only as barriers do they wait.
        XCTAssertTrue(eventually { probe.current > 0 })
        gate.open()
        XCTAssertTrue(eventually { barriersDone.value == 2 })
        queue.sync(flags: .barrier) {}
        XCTAssertEqual(violations.value, 0, "a barrier notification overlapped other items")
    }

    /// One run racing one wait, many times (WorkItemCore's state word): the wait must never
    /// be taken for a second one, nor the run for a run after a wait, and must return after
    /// the body.
    func testOneRunRacingOneWait() {
        let rounds = 20_000
        let bodies = Counter()
        var late = 0
        for _ in 0..<rounds {
            let ran = Flag()
            let item = DispatchWorkItem {
                ran.open()
                _ = bodies.increment()
            }
            DispatchQueue.global().async(execute: item)
            item.wait()
            if !ran.isOpen { late += 1 }
        }
        XCTAssertEqual(late, 0, "waits returned before their item ran")
        XCTAssertEqual(bodies.value, rounds)
    }
}
