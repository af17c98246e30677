// Target queues: a queue's items run in its target's context, so a hierarchy whose root is a
// serial queue runs one item at a time whatever the queues above it are; suspending a target
// holds back the queues that target it; preconditions hold for every queue up the chain.

import GrandCentral
import XCTest

final class TargetQueueTests: XCTestCase {

    func testConcurrentQueueTargetingASerialQueueRunsSerially() {
        let serial = DispatchQueue(label: "test.target.root")
        let concurrent = DispatchQueue(label: "test.target.concurrent", attributes: .concurrent, target: serial)
        let probe = ConcurrencyProbe()
        let done = Counter()
        for _ in 0..<300 {
            concurrent.async {
                probe.measure()
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 300 })
        XCTAssertEqual(probe.peak, 1, "a concurrent queue targeting a serial queue ran items in parallel")
    }

    func testNestedHierarchyWithASerialRootRunsSerially() {
        let root = DispatchQueue(label: "test.target.nested.root")
        let middle = DispatchQueue(label: "test.target.nested.middle", attributes: .concurrent, target: root)
        let leaves = (0..<4).map { i in
            DispatchQueue(label: "test.target.nested.leaf\(i)", attributes: i % 2 == 0 ? .concurrent : [], target: middle)
        }
        let probe = ConcurrencyProbe()
        let done = Counter()
        for i in 0..<400 {
            leaves[i % leaves.count].async {
                probe.measure()
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 400 })
        XCTAssertEqual(probe.peak, 1)
    }

    func testSerialQueuesSharingATargetNeverOverlapAndKeepTheirOrder() {
        let target = DispatchQueue(label: "test.target.shared")
        let queues = (0..<5).map { DispatchQueue(label: "test.target.shared.q\($0)", target: target) }
        let probe = ConcurrencyProbe()
        let logs = queues.map { _ in Recorder<Int>() }
        let items = 200
        for sequence in 0..<items {
            for (index, queue) in queues.enumerated() {
                let log = logs[index]
                queue.async {
                    probe.measure(spinMicroseconds: 20)
                    log.append(sequence)
                }
            }
        }
        XCTAssertTrue(eventually { logs.allSatisfy { $0.count == items } })
        XCTAssertEqual(probe.peak, 1)
        for log in logs {
            XCTAssertEqual(log.values, Array(0..<items))
        }
    }

    func testItemsOnATargetAndOnItsSubqueueNeverOverlap() {
        let target = DispatchQueue(label: "test.target.mixed")
        let subqueue = DispatchQueue(label: "test.target.mixed.sub", attributes: .concurrent, target: target)
        let probe = ConcurrencyProbe()
        let done = Counter()
        for i in 0..<300 {
            (i % 2 == 0 ? target : subqueue).async {
                probe.measure()
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 300 })
        XCTAssertEqual(probe.peak, 1)
    }

    /// A serial queue stays serial and FIFO even when its target is concurrent.
    func testSerialQueueTargetingAConcurrentQueueStaysSerial() {
        let concurrent = DispatchQueue(label: "test.target.concurrent.root", attributes: .concurrent)
        let serial = DispatchQueue(label: "test.target.serial.leaf", target: concurrent)
        let probe = ConcurrencyProbe()
        let log = Recorder<Int>()
        for i in 0..<300 {
            serial.async {
                probe.measure(spinMicroseconds: 50)
                log.append(i)
            }
        }
        XCTAssertTrue(eventually { log.count == 300 })
        XCTAssertEqual(probe.peak, 1)
        XCTAssertEqual(log.values, Array(0..<300))
    }

    /// More items than a concurrent queue's width, through a concurrent (non-root) parent:
    /// every item must hand its unit of width back to its own queue, or the queue stalls.
    func testConcurrentQueueTargetingAConcurrentQueueRunsEveryItem() {
        let parent = DispatchQueue(label: "test.target.cc.parent", attributes: .concurrent)
        let child = DispatchQueue(label: "test.target.cc.child", attributes: .concurrent, target: parent)
        let grandchild = DispatchQueue(label: "test.target.cc.grandchild", attributes: .concurrent, target: child)
        let done = Counter()
        let total = 10_000
        for i in 0..<total {
            (i % 2 == 0 ? child : grandchild).async { done.increment() }
        }
        XCTAssertTrue(waitForCount(done, toReach: total, stallTimeout: 10), "only \(done.value) of \(total) items ran")
    }

    func testSerialQueuesTargetingAConcurrentQueueRunSideBySide() {
        let concurrent = DispatchQueue(label: "test.target.fanout", attributes: .concurrent)
        let a = DispatchQueue(label: "test.target.fanout.a", target: concurrent)
        let b = DispatchQueue(label: "test.target.fanout.b", target: concurrent)
        let arrived = Counter()
        let met = Counter()
        for queue in [a, b] {
            queue.async {
                arrived.increment()
                if eventually(within: patience, { arrived.value == 2 }) { met.increment() }
            }
        }
        XCTAssertTrue(eventually { met.value == 2 }, "two serial queues on one concurrent target did not run in parallel")
    }

    func testSuspendingATargetHoldsBackItsSubqueues() {
        let target = DispatchQueue(label: "test.target.suspend")
        let subqueue = DispatchQueue(label: "test.target.suspend.sub", target: target)
        let concurrentSub = DispatchQueue(label: "test.target.suspend.csub", attributes: .concurrent, target: target)
        let done = Counter()
        target.suspend()
        for _ in 0..<10 {
            subqueue.async { done.increment() }
            concurrentSub.async { done.increment() }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(done.value, 0, "a subqueue ran while its target was suspended")
        target.resume()
        XCTAssertTrue(eventually { done.value == 20 })
    }

    func testSuspendingASubqueueDoesNotHoldBackItsTarget() {
        let target = DispatchQueue(label: "test.target.suspend.child")
        let subqueue = DispatchQueue(label: "test.target.suspend.child.sub", target: target)
        let subRan = Flag()
        let targetRan = Flag()
        subqueue.suspend()
        subqueue.async { subRan.open() }
        target.async { targetRan.open() }
        XCTAssertTrue(targetRan.wait())
        XCTAssertFalse(subRan.isOpen)
        subqueue.resume()
        XCTAssertTrue(subRan.wait())
    }

    func testSetTargetOnAnInactiveQueueBeforeActivation() {
        let target = DispatchQueue(label: "test.target.settarget")
        let key = DispatchSpecificKey<String>()
        target.setSpecific(key: key, value: "target")
        let queue = DispatchQueue(label: "test.target.settarget.sub", attributes: [.concurrent, .initiallyInactive])
        queue.setTarget(queue: target)
        let probe = ConcurrencyProbe()
        let seen = Recorder<String?>()
        for _ in 0..<100 {
            queue.async {
                probe.measure()
                seen.append(DispatchQueue.getSpecific(key: key))
            }
        }
        sleep(milliseconds: 50)
        XCTAssertEqual(seen.count, 0)
        queue.activate()
        XCTAssertTrue(eventually { seen.count == 100 })
        XCTAssertEqual(probe.peak, 1, "the queue did not run on its new serial target")
        XCTAssertTrue(seen.values.allSatisfy { $0 == "target" })
    }

    func testPreconditionsHoldForEveryQueueUpTheChain() {
        let root = DispatchQueue(label: "test.target.chain.root")
        let middle = DispatchQueue(label: "test.target.chain.middle", target: root)
        let leaf = DispatchQueue(label: "test.target.chain.leaf", target: middle)
        let bystander = DispatchQueue(label: "test.target.chain.bystander")
        let checked = Flag()
        leaf.async {
            dispatchPrecondition(condition: .onQueue(leaf))
            dispatchPrecondition(condition: .onQueue(middle))
            dispatchPrecondition(condition: .onQueue(root))
            dispatchPrecondition(condition: .notOnQueue(bystander))
            checked.open()
        }
        XCTAssertTrue(checked.wait())
        leaf.sync {
            dispatchPrecondition(condition: .onQueue(leaf))
            dispatchPrecondition(condition: .onQueue(root))
        }
    }

    /// An item of a concurrent queue that targets another concurrent queue runs "on" both, so
    /// the current queue's specific values come from the whole chain, nearest first. (Checked
    /// through getSpecific rather than dispatchPrecondition, which would abort the whole test
    /// run on failure.)
    func testConcurrentChainIsVisibleFromItsItems() {
        let parent = DispatchQueue(label: "test.target.cchain.parent", attributes: .concurrent)
        let child = DispatchQueue(label: "test.target.cchain.child", attributes: .concurrent, target: parent)
        let key = DispatchSpecificKey<String>()
        let parentKey = DispatchSpecificKey<String>()
        child.setSpecific(key: key, value: "child")
        parent.setSpecific(key: key, value: "parent")
        parent.setSpecific(key: parentKey, value: "parent")
        let seen = Recorder<[String?]>()
        for _ in 0..<10 {
            child.async {
                seen.append([DispatchQueue.getSpecific(key: key), DispatchQueue.getSpecific(key: parentKey)])
            }
        }
        XCTAssertTrue(eventually { seen.count == 10 })
        XCTAssertTrue(seen.values.allSatisfy { $0 == ["child", "parent"] }, "\(seen.values)")
    }

    func testQueueTargetingAGlobalQueueRuns() {
        let queue = DispatchQueue(label: "test.target.global", target: .global(qos: .utility))
        let log = Recorder<Int>()
        for i in 0..<50 {
            queue.async { log.append(i) }
        }
        XCTAssertTrue(eventually { log.count == 50 })
        XCTAssertEqual(log.values, Array(0..<50))
    }

    func testSyncThroughAHierarchyWaitsForTheRoot() {
        let root = DispatchQueue(label: "test.target.sync.root")
        let leaf = DispatchQueue(label: "test.target.sync.leaf", target: root)
        let started = Flag()
        let release = Flag()
        let syncRan = Flag()
        root.async {
            started.open()
            release.wait()
        }
        XCTAssertTrue(started.wait())
        let caller = TestThread { leaf.sync { syncRan.open() } }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(syncRan.isOpen, "sync on a subqueue ran while its serial target was busy")
        release.open()
        caller.join()
        XCTAssertTrue(syncRan.isOpen)
    }
}
