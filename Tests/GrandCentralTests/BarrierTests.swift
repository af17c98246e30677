// Barriers on a concurrent queue: a barrier starts only after every item submitted before it
// has finished, runs alone, and holds back every item submitted after it.

import Glibc
import GrandCentral
import Synchronization
import XCTest

/// What the items of one concurrent queue saw: each item records how many barriers had
/// finished when it started; each barrier records how many items were running beside it.
private final class BarrierLedger: Sendable {
    let barriersDone = Atomic<Int>(0)
    let barrierRunning = Atomic<Bool>(false)
    let running = ConcurrencyProbe()
    let overlaps = Counter()

    func item(_ body: () -> Void = {}) {
        running.enter()
        if barrierRunning.load(ordering: .sequentiallyConsistent) { overlaps.increment() }
        spin(microseconds: 100)
        body()
        running.leave()
    }

    func barrier(_ body: () -> Void = {}) {
        barrierRunning.store(true, ordering: .sequentiallyConsistent)
        if running.current != 0 { overlaps.increment() }
        spin(microseconds: 500)
        body()
        if running.current != 0 { overlaps.increment() }
        barriersDone.wrappingAdd(1, ordering: .sequentiallyConsistent)
        barrierRunning.store(false, ordering: .sequentiallyConsistent)
    }
}

final class BarrierTests: XCTestCase {

    func testBarrierWaitsForEveryEarlierItem() {
        let queue = DispatchQueue(label: "test.barrier.earlier", attributes: .concurrent)
        let finished = Counter()
        let seenByBarrier = Recorder<Int>()
        for i in 0..<40 {
            queue.async {
                if i % 4 == 0 { sleep(milliseconds: 5) }
                finished.increment()
            }
        }
        queue.async(flags: .barrier) { seenByBarrier.append(finished.value) }
        XCTAssertTrue(eventually { seenByBarrier.count == 1 })
        XCTAssertEqual(seenByBarrier.values, [40])
    }

    func testBarrierHoldsBackEveryLaterItem() {
        let queue = DispatchQueue(label: "test.barrier.later", attributes: .concurrent)
        let barrierDone = Flag()
        let early = Counter()
        let started = Counter()
        for _ in 0..<4 {
            queue.async {
                sleep(milliseconds: 2)
                started.increment()
            }
        }
        queue.async(flags: .barrier) {
            sleep(milliseconds: 50)
            barrierDone.open()
        }
        for _ in 0..<40 {
            queue.async {
                if !barrierDone.isOpen { early.increment() }
                started.increment()
            }
        }
        XCTAssertTrue(eventually { started.value == 44 })
        XCTAssertEqual(early.value, 0, "items submitted after a barrier ran before it finished")
    }

    func testBarrierRunsAlone() {
        let queue = DispatchQueue(label: "test.barrier.alone", attributes: .concurrent)
        let ledger = BarrierLedger()
        let done = Counter()
        for i in 0..<300 {
            if i % 50 == 25 {
                queue.async(flags: .barrier) { ledger.barrier(); done.increment() }
            } else {
                queue.async { ledger.item(); done.increment() }
            }
        }
        XCTAssertTrue(eventually { done.value == 300 })
        XCTAssertEqual(ledger.overlaps.value, 0, "a barrier overlapped another item")
        XCTAssertEqual(ledger.barriersDone.load(ordering: .sequentiallyConsistent), 6)
    }

    /// Every item must see exactly the barriers submitted before it as finished: no more
    /// (a later barrier ran early), no fewer (the item overtook an earlier barrier).
    func testItemsBetweenBarriersSeeExactlyTheBarriersBeforeThem() {
        let queue = DispatchQueue(label: "test.barrier.segments", attributes: .concurrent)
        let ledger = BarrierLedger()
        let mismatches = Counter()
        let done = Counter()
        var barriersSubmitted = 0
        let total = 1000
        for i in 0..<total {
            if i % 37 == 36 {
                queue.async(flags: .barrier) { ledger.barrier(); done.increment() }
                barriersSubmitted += 1
            } else {
                let expected = barriersSubmitted
                queue.async {
                    ledger.item {
                        if ledger.barriersDone.load(ordering: .sequentiallyConsistent) != expected {
                            mismatches.increment()
                        }
                    }
                    done.increment()
                }
            }
        }
        XCTAssertTrue(eventually { done.value == total })
        XCTAssertEqual(mismatches.value, 0)
        XCTAssertEqual(ledger.overlaps.value, 0)
        XCTAssertEqual(ledger.barriersDone.load(ordering: .sequentiallyConsistent), barriersSubmitted)
    }

    func testConsecutiveBarriersRunInSubmissionOrder() {
        let queue = DispatchQueue(label: "test.barrier.order", attributes: .concurrent)
        let log = Recorder<Int>()
        for i in 0..<100 {
            queue.async(flags: .barrier) { log.append(i) }
        }
        XCTAssertTrue(eventually { log.count == 100 })
        XCTAssertEqual(log.values, Array(0..<100))
    }

    func testBarrierSyncWaitsForEarlierItemsAndHoldsBackLaterOnes() {
        let queue = DispatchQueue(label: "test.barrier.sync", attributes: .concurrent)
        let finished = Counter()
        for _ in 0..<20 {
            queue.async {
                sleep(milliseconds: 2)
                finished.increment()
            }
        }
        let seen = queue.sync(flags: .barrier) { () -> Int in
            dispatchPrecondition(condition: .onQueueAsBarrier(queue))
            return finished.value
        }
        XCTAssertEqual(seen, 20)
    }

    func testBarrierWorkItem() {
        let queue = DispatchQueue(label: "test.barrier.workitem", attributes: .concurrent)
        let finished = Counter()
        let seenByBarrier = Recorder<Int>()
        for _ in 0..<20 {
            queue.async {
                sleep(milliseconds: 2)
                finished.increment()
            }
        }
        let barrier = DispatchWorkItem(flags: .barrier) { seenByBarrier.append(finished.value) }
        queue.async(execute: barrier)
        XCTAssertEqual(barrier.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(seenByBarrier.values, [20])
    }

    func testBarrierOnASerialQueueKeepsOrder() {
        let queue = DispatchQueue(label: "test.barrier.serial")
        let log = Recorder<Int>()
        for i in 0..<100 {
            queue.async(flags: i % 3 == 0 ? .barrier : []) { log.append(i) }
        }
        XCTAssertTrue(eventually { log.count == 100 })
        XCTAssertEqual(log.values, Array(0..<100))
    }

    func testOnQueueAsBarrierHoldsInsideABarrier() {
        let queue = DispatchQueue(label: "test.barrier.precondition", attributes: .concurrent)
        let checked = Flag()
        queue.async(flags: .barrier) {
            dispatchPrecondition(condition: .onQueueAsBarrier(queue))
            dispatchPrecondition(condition: .onQueue(queue))
            checked.open()
        }
        XCTAssertTrue(checked.wait())
    }

    func testBarrierAfterASuspendedBatch() {
        let queue = DispatchQueue(label: "test.barrier.suspended", attributes: .concurrent)
        let ledger = BarrierLedger()
        let done = Counter()
        queue.suspend()
        for i in 0..<60 {
            if i == 30 {
                queue.async(flags: .barrier) { ledger.barrier(); done.increment() }
            } else {
                queue.async { ledger.item(); done.increment() }
            }
        }
        queue.resume()
        XCTAssertTrue(eventually { done.value == 60 })
        XCTAssertEqual(ledger.overlaps.value, 0)
    }

    /// A barrier is a barrier for its own queue even when that queue targets another
    /// concurrent queue (not a root queue): it still runs alone among its queue's items and
    /// the queue goes on afterwards.
    func testBarrierOnAConcurrentQueueTargetingAConcurrentQueue() {
        let parent = DispatchQueue(label: "test.barrier.parent", attributes: .concurrent)
        let child = DispatchQueue(label: "test.barrier.child", attributes: .concurrent, target: parent)
        let ledger = BarrierLedger()
        let done = Counter()
        let total = 200
        for i in 0..<total {
            if i % 20 == 10 {
                child.async(flags: .barrier) { ledger.barrier(); done.increment() }
            } else {
                child.async { ledger.item(); done.increment() }
            }
        }
        XCTAssertTrue(eventually { done.value == total }, "only \(done.value) of \(total) items ran")
        XCTAssertEqual(ledger.overlaps.value, 0)
        XCTAssertEqual(ledger.barriersDone.load(ordering: .sequentiallyConsistent), total / 20)
    }

    func testBarrierOnAConcurrentParentHoldsBackItsChildQueues() {
        let parent = DispatchQueue(label: "test.barrier.parent.hold", attributes: .concurrent)
        let child = DispatchQueue(label: "test.barrier.child.hold", attributes: .concurrent, target: parent)
        let barrierDone = Flag()
        let early = Counter()
        let done = Counter()
        parent.async(flags: .barrier) {
            sleep(milliseconds: 50)
            barrierDone.open()
        }
        for _ in 0..<20 {
            child.async {
                if !barrierDone.isOpen { early.increment() }
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 20 })
        XCTAssertEqual(early.value, 0, "a child queue's item ran while its parent's barrier was running")
    }
}
