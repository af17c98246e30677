// Queues: FIFO and one-at-a-time on serial queues, parallelism on concurrent ones, the global
// and main queues, labels and QoS, asyncAfter, suspension and initially inactive queues.

import Glibc
import GrandCentral
import XCTest

final class QueueTests: XCTestCase {

    // MARK: Serial queues

    func testSerialQueueRunsItemsInSubmissionOrder() {
        let queue = DispatchQueue(label: "test.serial.fifo")
        let log = Recorder<Int>()
        for i in 0..<1000 {
            queue.async { log.append(i) }
        }
        XCTAssertTrue(eventually { log.count == 1000 })
        XCTAssertEqual(log.values, Array(0..<1000))
    }

    func testSerialQueueRunsOneItemAtATime() {
        let queue = DispatchQueue(label: "test.serial.exclusive")
        let probe = ConcurrencyProbe()
        let done = Counter()
        for _ in 0..<200 {
            queue.async {
                probe.measure()
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 200 })
        XCTAssertEqual(probe.peak, 1)
    }

    func testSerialQueueKeepsEachProducersOrder() {
        let queue = DispatchQueue(label: "test.serial.producers")
        let perProducer = 5000
        let log = Recorder<(producer: Int, sequence: Int)>()
        let producers = (0..<2).map { producer in
            TestThread {
                for sequence in 0..<perProducer {
                    queue.async { log.append((producer, sequence)) }
                }
            }
        }
        producers.forEach { $0.join() }
        XCTAssertTrue(eventually { log.count == 2 * perProducer })
        for producer in 0..<2 {
            let seen = log.values.filter { $0.producer == producer }.map(\.sequence)
            XCTAssertEqual(seen, Array(0..<perProducer), "producer \(producer)")
        }
    }

    func testItemsSubmittedFromARunningItemRunAfterIt() {
        let queue = DispatchQueue(label: "test.serial.reentrant")
        let log = Recorder<String>()
        queue.async {
            queue.async { log.append("inner") }
            sleep(milliseconds: 20)
            log.append("outer")
        }
        XCTAssertTrue(eventually { log.count == 2 })
        XCTAssertEqual(log.values, ["outer", "inner"])
    }

    // MARK: Concurrent queues

    func testConcurrentQueueRunsEveryItem() {
        let queue = DispatchQueue(label: "test.concurrent.all", attributes: .concurrent)
        let done = Counter()
        for _ in 0..<5000 {
            queue.async { done.increment() }
        }
        XCTAssertTrue(eventually { done.value == 5000 })
        sleep(milliseconds: 50)
        XCTAssertEqual(done.value, 5000, "an item ran more than once")
    }

    /// Two items that can only finish if they run at the same time.
    func testConcurrentQueueRunsItemsAtTheSameTime() {
        let queue = DispatchQueue(label: "test.concurrent.rendezvous", attributes: .concurrent)
        let arrived = Counter()
        let met = Counter()
        for _ in 0..<2 {
            queue.async {
                arrived.increment()
                if eventually(within: patience, { arrived.value == 2 }) { met.increment() }
            }
        }
        XCTAssertTrue(eventually { met.value == 2 }, "the two items never ran at the same time")
    }

    // MARK: Global and main queues

    func testGlobalQueuesRunWorkForEveryQoS() {
        let classes: [DispatchQoS.QoSClass] = [
            .background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
        ]
        let done = Counter()
        for qosClass in classes {
            DispatchQueue.global(qos: qosClass).async { done.increment() }
        }
        DispatchQueue.global().async { done.increment() }
        XCTAssertTrue(eventually { done.value == classes.count + 1 })
    }

    func testGlobalQueueIsConcurrent() {
        let arrived = Counter()
        let met = Counter()
        for _ in 0..<2 {
            DispatchQueue.global(qos: .utility).async {
                arrived.increment()
                if eventually(within: patience, { arrived.value == 2 }) { met.increment() }
            }
        }
        XCTAssertTrue(eventually { met.value == 2 })
    }

    func testQueueLabels() {
        XCTAssertEqual(DispatchQueue(label: "com.example.worker").label, "com.example.worker")
        XCTAssertEqual(DispatchQueue(label: "").label, "")
        XCTAssertEqual(DispatchQueue.main.label, "com.apple.main-thread")
    }

    /// libdispatch's names for its root queues; programs print and match them. (The Linux
    /// libdispatch serves `.userInteractive` from its user-initiated root queue, so that class
    /// is left out rather than pinning a port quirk.)
    func testGlobalQueueLabelsAreLibdispatchs() {
        XCTAssertEqual(DispatchQueue.global(qos: .background).label, "com.apple.root.background-qos")
        XCTAssertEqual(DispatchQueue.global(qos: .utility).label, "com.apple.root.utility-qos")
        XCTAssertEqual(DispatchQueue.global(qos: .default).label, "com.apple.root.default-qos")
        XCTAssertEqual(DispatchQueue.global(qos: .userInitiated).label, "com.apple.root.user-initiated-qos")
    }

    /// XCTest runs tests on the main thread; libdispatch binds the main queue to that thread.
    func testTheMainThreadIsOnTheMainQueue() {
        dispatchPrecondition(condition: .onQueue(.main))
        let onWorker = Flag()
        DispatchQueue.global().async {
            dispatchPrecondition(condition: .notOnQueue(.main))
            onWorker.open()
        }
        XCTAssertTrue(onWorker.wait())
    }

    // MARK: QoS

    func testQoSValues() {
        XCTAssertEqual(DispatchQoS.background.qosClass, .background)
        XCTAssertEqual(DispatchQoS.utility.qosClass, .utility)
        XCTAssertEqual(DispatchQoS.default.qosClass, .default)
        XCTAssertEqual(DispatchQoS.userInitiated.qosClass, .userInitiated)
        XCTAssertEqual(DispatchQoS.userInteractive.qosClass, .userInteractive)
        XCTAssertEqual(DispatchQoS.unspecified.qosClass, .unspecified)
        XCTAssertEqual(DispatchQoS.utility.relativePriority, 0)

        let lowered = DispatchQoS(qosClass: .userInitiated, relativePriority: -5)
        XCTAssertEqual(lowered.qosClass, .userInitiated)
        XCTAssertEqual(lowered.relativePriority, -5)
        XCTAssertNotEqual(lowered, .userInitiated)
        XCTAssertEqual(lowered, DispatchQoS(qosClass: .userInitiated, relativePriority: -5))
        XCTAssertEqual(DispatchQoS(qosClass: .utility, relativePriority: 0), .utility)
    }

    /// (`.userInteractive` is left out: the Linux libdispatch reports it as `.userInitiated`.)
    func testQueueReportsTheQoSItWasCreatedWith() {
        XCTAssertEqual(DispatchQueue(label: "test.qos.utility", qos: .utility).qos, .utility)
        XCTAssertEqual(DispatchQueue(label: "test.qos.initiated", qos: .userInitiated).qos, .userInitiated)
        XCTAssertEqual(DispatchQueue(label: "test.qos.none").qos, .unspecified)
        let lowered = DispatchQoS(qosClass: .background, relativePriority: -3)
        XCTAssertEqual(DispatchQueue(label: "test.qos.lowered", qos: lowered).qos, lowered)
    }

    func testItemsWithQoSAndFlagsRun() {
        let queue = DispatchQueue(label: "test.qos.items", qos: .utility, autoreleaseFrequency: .workItem)
        let done = Counter()
        let variants: [(DispatchQoS, DispatchWorkItemFlags)] = [
            (.unspecified, []), (.background, []), (.userInteractive, .enforceQoS),
            (.default, .inheritQoS), (.utility, .detached), (.unspecified, .assignCurrentContext),
            (.userInitiated, .noQoS),
        ]
        for (qos, flags) in variants {
            queue.async(qos: qos, flags: flags) { done.increment() }
        }
        XCTAssertTrue(eventually { done.value == variants.count })
    }

    // MARK: asyncAfter

    func testAsyncAfterDoesNotRunBeforeTheDeadline() {
        let queue = DispatchQueue(label: "test.after.deadline")
        let start = monotonicNanoseconds()
        let ranAt = Recorder<UInt64>()
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { ranAt.append(monotonicNanoseconds()) }
        XCTAssertTrue(eventually { ranAt.count == 1 })
        let elapsed = (ranAt.values.first ?? 0) &- start
        XCTAssertGreaterThanOrEqual(elapsed, 99_000_000, "ran after \(elapsed) ns")
    }

    func testAsyncAfterRunsItemsInDeadlineOrder() {
        let queue = DispatchQueue(label: "test.after.order")
        let log = Recorder<String>()
        queue.asyncAfter(deadline: .now() + .milliseconds(300)) { log.append("late") }
        queue.asyncAfter(deadline: .now() + 0.05) { log.append("early") }
        queue.asyncAfter(deadline: .now() + .microseconds(150_000), qos: .userInitiated, flags: .enforceQoS) {
            log.append("middle")
        }
        XCTAssertTrue(eventually { log.count == 3 })
        XCTAssertEqual(log.values, ["early", "middle", "late"])
    }

    func testAsyncAfterWithAPastDeadlineRunsSoon() {
        let queue = DispatchQueue(label: "test.after.past")
        let ran = Flag()
        queue.asyncAfter(deadline: .now() - .seconds(1)) { ran.open() }
        XCTAssertTrue(ran.wait())
    }

    func testAsyncAfterOnASuspendedQueueWaitsForResume() {
        let queue = DispatchQueue(label: "test.after.suspended")
        let ran = Flag()
        queue.suspend()
        queue.asyncAfter(deadline: .now() + .milliseconds(10)) { ran.open() }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(ran.isOpen, "a timer item ran on a suspended queue")
        queue.resume()
        XCTAssertTrue(ran.wait())
    }

    // MARK: Suspension

    func testSuspendHoldsBackNewItemsButNotTheRunningOne() {
        let queue = DispatchQueue(label: "test.suspend.running")
        let started = Flag()
        let release = Flag()
        let log = Recorder<String>()
        queue.async {
            started.open()
            release.wait()
            log.append("running")
        }
        XCTAssertTrue(started.wait())
        queue.suspend()
        queue.async { log.append("later") }
        release.open()
        XCTAssertTrue(eventually { log.count == 1 }, "suspend stopped the item that was running")
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(log.values, ["running"], "an item ran on a suspended queue")
        queue.resume()
        XCTAssertTrue(eventually { log.count == 2 })
        XCTAssertEqual(log.values, ["running", "later"])
    }

    func testSuspendedQueueRunsNothingUntilResumed() {
        let queue = DispatchQueue(label: "test.suspend.serial")
        let log = Recorder<Int>()
        queue.suspend()
        for i in 0..<10 {
            queue.async { log.append(i) }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(log.count, 0)
        queue.resume()
        XCTAssertTrue(eventually { log.count == 10 })
        XCTAssertEqual(log.values, Array(0..<10))
    }

    func testSuspensionsAreCounted() {
        let queue = DispatchQueue(label: "test.suspend.counted", attributes: .concurrent)
        let ran = Flag()
        queue.suspend()
        queue.suspend()
        queue.async { ran.open() }
        queue.resume()
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertFalse(ran.isOpen, "one resume undid two suspends")
        queue.resume()
        XCTAssertTrue(ran.wait())
    }

    func testSuspendedConcurrentQueueRunsNothingUntilResumed() {
        let queue = DispatchQueue(label: "test.suspend.concurrent", attributes: .concurrent)
        let done = Counter()
        queue.suspend()
        for _ in 0..<50 {
            queue.async { done.increment() }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(done.value, 0)
        queue.resume()
        XCTAssertTrue(eventually { done.value == 50 })
    }

    // MARK: Initially inactive queues

    func testInactiveQueueRunsNothingUntilActivated() {
        let queue = DispatchQueue(label: "test.inactive.serial", attributes: .initiallyInactive)
        let log = Recorder<Int>()
        for i in 0..<10 {
            queue.async { log.append(i) }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(log.count, 0, "an inactive queue ran an item")
        queue.activate()
        XCTAssertTrue(eventually { log.count == 10 })
        XCTAssertEqual(log.values, Array(0..<10))
    }

    func testInactiveConcurrentQueueRunsNothingUntilActivated() {
        let queue = DispatchQueue(
            label: "test.inactive.concurrent", attributes: [.concurrent, .initiallyInactive])
        let done = Counter()
        for _ in 0..<50 {
            queue.async { done.increment() }
        }
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(done.value, 0, "an inactive queue ran an item")
        queue.activate()
        XCTAssertTrue(eventually { done.value == 50 })
    }

    func testActivatedQueueKeepsWorking() {
        let queue = DispatchQueue(label: "test.inactive.after", attributes: .initiallyInactive)
        queue.activate()
        let done = Counter()
        for _ in 0..<10 {
            queue.async { done.increment() }
        }
        XCTAssertTrue(eventually { done.value == 10 })
        XCTAssertEqual(queue.sync { 7 }, 7)
    }

    // MARK: dispatchPrecondition

    func testPreconditionsInsideAnItem() {
        let queue = DispatchQueue(label: "test.precondition.serial")
        let other = DispatchQueue(label: "test.precondition.other")
        let checked = Flag()
        queue.async {
            dispatchPrecondition(condition: .onQueue(queue))
            dispatchPrecondition(condition: .onQueueAsBarrier(queue))
            dispatchPrecondition(condition: .notOnQueue(other))
            checked.open()
        }
        XCTAssertTrue(checked.wait())
        dispatchPrecondition(condition: .notOnQueue(queue))
    }

    func testPreconditionsInsideAConcurrentItem() {
        let queue = DispatchQueue(label: "test.precondition.concurrent", attributes: .concurrent)
        let checked = Flag()
        queue.async {
            dispatchPrecondition(condition: .onQueue(queue))
            checked.open()
        }
        XCTAssertTrue(checked.wait())
    }

    // MARK: Lifetime

    /// Dropping the last reference to a queue with pending items drops no item (hard rule 6).
    func testReleasedQueueStillRunsItsPendingItems() {
        let done = Counter()
        let release = Flag()
        do {
            let queue = DispatchQueue(label: "test.lifetime")
            queue.async { release.wait() }
            for _ in 0..<100 {
                queue.async { done.increment() }
            }
        }
        release.open()
        XCTAssertTrue(eventually { done.value == 100 })
    }
}
