// Queues as Swift concurrency executors (SwiftAPI/QueueExecutors.swift): an actor on a
// DispatchSerialQueue, and tasks that prefer a DispatchConcurrentQueue.

import GrandCentral
import XCTest

/// An actor whose executor is a GrandCentral serial queue.
actor QueueBoundCounter {
    let queue: DispatchSerialQueue
    private(set) var value = 0

    init(queue: DispatchSerialQueue) { self.queue = queue }

    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    /// Adds one; checks that the actor's code runs on its queue.
    func increment() -> Int {
        dispatchPrecondition(condition: .onQueue(queue))
        value += 1
        return value
    }
}

final class ExecutorTests: XCTestCase {
    func testActorMethodsRunOnTheQueueOneAtATime() async {
        let queue = DispatchSerialQueue(label: "test.executor.actor")
        let counter = QueueBoundCounter(queue: queue)
        let results = await withTaskGroup(of: Int.self, returning: [Int].self) { group in
            for _ in 0..<1000 {
                group.addTask { await counter.increment() }
            }
            var all: [Int] = []
            for await value in group { all.append(value) }
            return all
        }
        XCTAssertEqual(results.sorted(), Array(1...1000), "every increment saw a distinct value")
        let final = await counter.value
        XCTAssertEqual(final, 1000)
    }

    func testAssumeIsolatedHoldsInABlockOnTheQueue() {
        let queue = DispatchSerialQueue(label: "test.executor.assume")
        let counter = QueueBoundCounter(queue: queue)
        let value = queue.sync {
            counter.assumeIsolated { isolated in isolated.value }
        }
        XCTAssertEqual(value, 0)
    }

    func testActorWorkKeepsOrderWithBlocksOnTheSameQueue() async {
        let queue = DispatchSerialQueue(label: "test.executor.order")
        let counter = QueueBoundCounter(queue: queue)
        _ = await counter.increment()
        let seen = Recorder<Int>()
        let done = Flag()
        queue.async {
            // A block on the actor's queue is isolated to the actor.
            seen.append(counter.assumeIsolated { $0.value })
            done.open()
        }
        XCTAssertTrue(done.wait())
        XCTAssertEqual(seen.values, [1])
    }

    func testTasksPreferringAConcurrentQueueRunOnIt() async {
        let queue = DispatchConcurrentQueue(label: "test.executor.task")
        let values = await withTaskGroup(of: Int.self, returning: [Int].self) { group in
            for i in 0..<100 {
                group.addTask(executorPreference: queue) {
                    dispatchPrecondition(condition: .onQueue(queue))
                    return i
                }
            }
            var all: [Int] = []
            for await value in group { all.append(value) }
            return all
        }
        XCTAssertEqual(values.sorted(), Array(0..<100))
        let single = await Task(executorPreference: queue) { () -> Bool in
            dispatchPrecondition(condition: .onQueue(queue))
            return true
        }.value
        XCTAssertTrue(single)
    }

    func testSerialAndConcurrentQueuesAreQueues() {
        let serial = DispatchSerialQueue(label: "test.executor.serial", qos: .utility)
        let concurrent = DispatchConcurrentQueue(label: "test.executor.concurrent", target: serial)
        XCTAssertEqual(serial.label, "test.executor.serial")
        XCTAssertEqual(serial.qos, .utility)
        let order = Recorder<Int>()
        for i in 0..<50 { concurrent.async { order.append(i) } }
        concurrent.sync(flags: .barrier) {}
        XCTAssertEqual(order.values, Array(0..<50), "a concurrent queue targeting a serial one runs serially")
    }
}
