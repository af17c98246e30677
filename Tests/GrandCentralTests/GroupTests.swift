// DispatchGroup: wait returns once every member has finished, wait(timeout:) times out while a
// member is outstanding, notify runs once on the queue it names, and a group can be reused.
// Every test leaves its groups balanced: libdispatch aborts on releasing a group in use.

import GrandCentral
import XCTest

final class GroupTests: XCTestCase {

    func testWaitReturnsAfterEveryItemInTheGroupRan() {
        let group = DispatchGroup()
        let queue = DispatchQueue(label: "test.group.wait", attributes: .concurrent)
        let done = Counter()
        for i in 0..<50 {
            queue.async(group: group) {
                if i % 5 == 0 { sleep(milliseconds: 5) }
                done.increment()
            }
        }
        group.wait()
        XCTAssertEqual(done.value, 50)
    }

    func testWaitOnAnEmptyGroupSucceedsAtOnce() {
        let group = DispatchGroup()
        XCTAssertEqual(group.wait(timeout: .now()), .success)
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        group.wait()
    }

    func testWaitTimesOutWhileAMemberIsOutstanding() {
        let group = DispatchGroup()
        group.enter()
        XCTAssertEqual(group.wait(timeout: .now()), .timedOut)
        let start = monotonicNanoseconds()
        XCTAssertEqual(group.wait(timeout: .now() + .milliseconds(100)), .timedOut)
        XCTAssertGreaterThanOrEqual(monotonicNanoseconds() - start, 99_000_000, "wait gave up before its deadline")
        group.leave()
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
    }

    func testLeaveFromAnotherThreadWakesTheWaiter() {
        let group = DispatchGroup()
        group.enter()
        let leaver = TestThread {
            sleep(milliseconds: 50)
            group.leave()
        }
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        leaver.join()
    }

    func testEnterAndLeaveFromManyThreadsBalance() {
        let group = DispatchGroup()
        let threads = (0..<4).map { _ in
            TestThread {
                for _ in 0..<5000 {
                    group.enter()
                    group.leave()
                }
            }
        }
        threads.forEach { $0.join() }
        XCTAssertEqual(group.wait(timeout: .now()), .success)
        for _ in 0..<100 { group.enter() }
        let leavers = (0..<4).map { _ in
            TestThread { for _ in 0..<25 { group.leave() } }
        }
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        leavers.forEach { $0.join() }
    }

    func testNotifyRunsOnItsQueueAfterEveryMember() {
        let group = DispatchGroup()
        let work = DispatchQueue(label: "test.group.notify.work", attributes: .concurrent)
        let notifyQueue = DispatchQueue(label: "test.group.notify.queue")
        let done = Counter()
        let seenByNotify = Recorder<Int>()
        for _ in 0..<30 {
            work.async(group: group) {
                sleep(milliseconds: 2)
                done.increment()
            }
        }
        group.notify(queue: notifyQueue) {
            dispatchPrecondition(condition: .onQueue(notifyQueue))
            seenByNotify.append(done.value)
        }
        XCTAssertTrue(eventually { seenByNotify.count == 1 })
        XCTAssertEqual(seenByNotify.values, [30])
    }

    func testNotifyDoesNotRunEarly() {
        let group = DispatchGroup()
        let ran = Flag()
        group.enter()
        group.notify(queue: .global()) { ran.open() }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(ran.isOpen, "notify ran while the group had an outstanding member")
        group.leave()
        XCTAssertTrue(ran.wait())
    }

    func testNotifyOnAnEmptyGroupRuns() {
        let group = DispatchGroup()
        let ran = Flag()
        group.notify(queue: DispatchQueue(label: "test.group.empty")) { ran.open() }
        XCTAssertTrue(ran.wait())
    }

    func testEveryNotifyRunsExactlyOnce() {
        let group = DispatchGroup()
        let runs = Counter()
        group.enter()
        for i in 0..<10 {
            group.notify(qos: .utility, flags: [], queue: i % 2 == 0 ? .global() : DispatchQueue(label: "n\(i)")) {
                runs.increment()
            }
        }
        group.leave()
        XCTAssertTrue(eventually { runs.value == 10 })
        sleep(milliseconds: 50)
        XCTAssertEqual(runs.value, 10)
    }

    func testGroupIsReusableAfterItEmpties() {
        let group = DispatchGroup()
        let queue = DispatchQueue(label: "test.group.reuse")
        let rounds = Recorder<Int>()
        for round in 0..<3 {
            let done = Counter()
            for _ in 0..<10 {
                queue.async(group: group) { done.increment() }
            }
            group.notify(queue: queue) { rounds.append(round * 100 + done.value) }
            XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
            XCTAssertEqual(done.value, 10)
            XCTAssertTrue(eventually { rounds.count == round + 1 })
        }
        XCTAssertEqual(rounds.values, [10, 110, 210])
    }

    func testNotifyWithAWorkItem() {
        let group = DispatchGroup()
        let done = Counter()
        let seen = Recorder<Int>()
        for _ in 0..<10 {
            DispatchQueue.global().async(group: group) { done.increment() }
        }
        let item = DispatchWorkItem { seen.append(done.value) }
        group.notify(queue: DispatchQueue(label: "test.group.notify.item"), work: item)
        XCTAssertEqual(item.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(seen.values, [10])
    }

    /// notify(flags: .barrier) and a barrier work item run as barriers on a concurrent
    /// queue (as Dispatch does): after the items already running there, alone, and before
    /// the notifications registered after them.
    func testBarrierNotificationRunsAloneAndInOrder() {
        let queue = DispatchQueue(label: "test.group.notify.barrier", attributes: .concurrent)
        let probe = ConcurrencyProbe()
        let violations = Counter()
        let barriersDone = Counter()
        let group = DispatchGroup()
        group.enter()
        for _ in 0..<4 {
            queue.async { probe.measure(spinMicroseconds: 20_000) }
        }
        group.notify(flags: .barrier, queue: queue) {
            if probe.current != 0 { _ = violations.increment() }
            sleep(milliseconds: 10)
            if probe.current != 0 { _ = violations.increment() }
            _ = barriersDone.increment()
        }
        let item = DispatchWorkItem(flags: .barrier) {
            if probe.current != 0 { _ = violations.increment() }
            _ = barriersDone.increment()
        }
        group.notify(queue: queue, work: item)
        let late = Counter()
        group.notify(queue: queue) {
            if barriersDone.value != 2 { _ = late.increment() }
        }
        sleep(milliseconds: 5)
        group.leave()
        queue.sync(flags: .barrier) {}
        XCTAssertTrue(eventually { barriersDone.value == 2 })
        queue.sync(flags: .barrier) {}
        XCTAssertEqual(violations.value, 0)
        XCTAssertEqual(late.value, 0)
    }

    func testGroupSpanningSeveralQueues() {
        let group = DispatchGroup()
        let queues = [
            DispatchQueue(label: "test.group.span.a"),
            DispatchQueue(label: "test.group.span.b", attributes: .concurrent),
            DispatchQueue.global(qos: .utility),
        ]
        let done = Counter()
        for i in 0..<300 {
            queues[i % queues.count].async(group: group) { done.increment() }
        }
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(done.value, 300)
    }

    func testWorkItemSubmittedWithAGroup() {
        let group = DispatchGroup()
        let done = Counter()
        let queue = DispatchQueue(label: "test.group.workitem")
        let item = DispatchWorkItem {
            sleep(milliseconds: 20)
            done.increment()
        }
        queue.async(group: group, execute: item)
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(done.value, 1)
    }

    /// Group membership spans the work an item starts, when it enters before starting it.
    func testNestedWorkEnteredFromAnItem() {
        let group = DispatchGroup()
        let queue = DispatchQueue(label: "test.group.nested", attributes: .concurrent)
        let done = Counter()
        for _ in 0..<10 {
            queue.async(group: group) {
                for _ in 0..<10 {
                    group.enter()
                    queue.async {
                        done.increment()
                        group.leave()
                    }
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(done.value, 100)
    }

    func testWaitInsideAQueueItem() {
        let group = DispatchGroup()
        let outcome = Recorder<DispatchTimeoutResult>()
        let members = Counter()
        for _ in 0..<5 {
            DispatchQueue.global().async(group: group) {
                sleep(milliseconds: 10)
                members.increment()
            }
        }
        DispatchQueue(label: "test.group.waiter").async {
            outcome.append(group.wait(timeout: .now() + patience))
        }
        XCTAssertTrue(eventually { outcome.count == 1 })
        XCTAssertEqual(outcome.values, [.success])
        XCTAssertEqual(members.value, 5)
    }
}
