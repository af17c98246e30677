// Stress: a million items across a thousand queues of every kind (serial, concurrent with
// barriers, nested target hierarchies) from two producer threads. Counts, not speed: every
// item runs exactly once, serial queues keep each producer's order, barriers run alone and
// after exactly the items submitted before them. Run it under ThreadSanitizer too
// (`swift test --sanitize=thread`).

import Glibc
import GrandCentral
import Synchronization
import XCTest

/// What one leaf queue's items check as they run.
private final class LeafLedger: Sendable {
    enum Kind { case serial, concurrent }

    let kind: Kind
    /// How the queue was made ("serial -> global", "concurrent -> stress.hub.serial3" ...).
    let shape: String
    let submitted = Counter()
    let completed = Counter()
    // Per producer: the sequence number of the last item that ran (serial leaves).
    private let lastSequence0 = Atomic<Int>(-1)
    private let lastSequence1 = Atomic<Int>(-1)
    // Per producer: how many of its items have finished (concurrent leaves).
    private let finished0 = Atomic<Int>(0)
    private let finished1 = Atomic<Int>(0)
    let running = Atomic<Int>(0)
    let barrierRunning = Atomic<Bool>(false)

    init(kind: Kind, shape: String) {
        self.kind = kind
        self.shape = shape
    }

    /// Records that `producer`'s item `sequence` ran; returns the previous one's number.
    func replaceLastSequence(of producer: Int, with sequence: Int) -> Int {
        producer == 0
            ? lastSequence0.exchange(sequence, ordering: .relaxed)
            : lastSequence1.exchange(sequence, ordering: .relaxed)
    }

    func finishedCount(of producer: Int) -> Int {
        producer == 0
            ? finished0.load(ordering: .sequentiallyConsistent)
            : finished1.load(ordering: .sequentiallyConsistent)
    }

    func finish(for producer: Int) {
        if producer == 0 {
            finished0.wrappingAdd(1, ordering: .sequentiallyConsistent)
        } else {
            finished1.wrappingAdd(1, ordering: .sequentiallyConsistent)
        }
    }
}

/// Violations found by the items themselves, summed over all queues.
private final class StressReport: Sendable {
    let fifoViolations = Counter()
    let exclusionViolations = Counter()
    let barrierEarlyOrLate = Counter()
    let completed = Counter()
}

final class StressTests: XCTestCase {

    func testMillionItemsAcrossThousandQueuesFromTwoProducers() {
        let leafCount = 1000
        let producers = 2
        let itemsPerProducer = 500_000
        let barrierEvery = 16

        // Hubs: the inner nodes of the target hierarchies.
        let globals: [DispatchQueue] = [
            .global(qos: .background), .global(qos: .utility), .global(), .global(qos: .userInitiated),
        ]
        let serialHubs = (0..<8).map { DispatchQueue(label: "stress.hub.serial\($0)", target: globals[$0 % 4]) }
        let concurrentHubs = (0..<8).map {
            DispatchQueue(label: "stress.hub.concurrent\($0)", attributes: .concurrent, target: globals[$0 % 4])
        }
        // Second level: serial over concurrent and concurrent over serial.
        let nestedHubs = (0..<4).map {
            DispatchQueue(label: "stress.hub.nested.serial\($0)", target: concurrentHubs[$0])
        } + (0..<4).map {
            DispatchQueue(label: "stress.hub.nested.concurrent\($0)", attributes: .concurrent, target: serialHubs[$0])
        }
        let hubs = serialHubs + concurrentHubs + nestedHubs

        let leaves: [(queue: DispatchQueue, ledger: LeafLedger)] = (0..<leafCount).map { i in
            let hub = hubs[(i / 4) % hubs.count]
            let label = "stress.leaf\(i)"
            switch i % 4 {
            case 0:
                return (DispatchQueue(label: label), LeafLedger(kind: .serial, shape: "serial"))
            case 1:
                return (DispatchQueue(label: label, target: hub),
                        LeafLedger(kind: .serial, shape: "serial -> \(hub.label)"))
            case 2:
                return (DispatchQueue(label: label, attributes: .concurrent),
                        LeafLedger(kind: .concurrent, shape: "concurrent"))
            default:
                return (DispatchQueue(label: label, attributes: .concurrent, target: hub),
                        LeafLedger(kind: .concurrent, shape: "concurrent -> \(hub.label)"))
            }
        }

        let ran = IndexCounts(count: producers * itemsPerProducer)
        let report = StressReport()

        let threads = (0..<producers).map { producer in
            TestThread {
                var sequence = [Int](repeating: 0, count: leafCount)
                for k in 0..<itemsPerProducer {
                    let id = producer * itemsPerProducer + k
                    // A stride coprime with the leaf count spreads consecutive items.
                    let leafIndex = (k &* 7 &+ producer &* 13) % leafCount
                    let (queue, ledger) = leaves[leafIndex]
                    let seq = sequence[leafIndex]
                    sequence[leafIndex] += 1
                    ledger.submitted.increment()
                    switch ledger.kind {
                    case .serial:
                        queue.async {
                            Self.runSerialItem(ledger, producer: producer, sequence: seq, report: report)
                            ran.hit(id)
                            ledger.completed.increment()
                            report.completed.increment()
                        }
                    case .concurrent where seq % barrierEvery == barrierEvery - 1:
                        queue.async(flags: .barrier) {
                            Self.runBarrier(ledger, producer: producer, sequence: seq, report: report)
                            ran.hit(id)
                            ledger.completed.increment()
                            report.completed.increment()
                        }
                    case .concurrent:
                        queue.async {
                            Self.runConcurrentItem(ledger, producer: producer, report: report)
                            ran.hit(id)
                            ledger.completed.increment()
                            report.completed.increment()
                        }
                    }
                }
            }
        }
        threads.forEach { $0.join() }

        let total = producers * itemsPerProducer
        let allRan = waitForCount(report.completed, toReach: total)
        XCTAssertTrue(allRan, "stalled: only \(report.completed.value) of \(total) items ran")
        if !allRan {
            let stalled = leaves.map(\.ledger).enumerated().filter {
                $0.element.completed.value != $0.element.submitted.value
            }
            let shapes = Dictionary(grouping: stalled, by: { $0.element.shape }).mapValues(\.count)
            XCTFail("\(stalled.count) leaf queues still have pending items, by shape: \(shapes)")
            for (index, ledger) in stalled.prefix(5) {
                XCTFail("stress.leaf\(index) (\(ledger.shape)): \(ledger.completed.value) of \(ledger.submitted.value) ran")
            }
        }
        sleep(milliseconds: 100)
        XCTAssertEqual(report.completed.value, total)
        let wrong = ran.mismatches()
        XCTAssertTrue(wrong.isEmpty, "items run other than once (id, count): \(wrong)")
        XCTAssertEqual(report.fifoViolations.value, 0, "serial queues broke a producer's order")
        XCTAssertEqual(report.exclusionViolations.value, 0, "an item ran beside another on a serial queue, or beside a barrier")
        XCTAssertEqual(report.barrierEarlyOrLate.value, 0, "a barrier did not run after exactly the items before it")
    }

    private static func runSerialItem(_ ledger: LeafLedger, producer: Int, sequence: Int, report: StressReport) {
        if ledger.replaceLastSequence(of: producer, with: sequence) != sequence - 1 {
            report.fifoViolations.increment()
        }
        if ledger.running.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue != 1 {
            report.exclusionViolations.increment()
        }
        ledger.running.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    private static func runConcurrentItem(_ ledger: LeafLedger, producer: Int, report: StressReport) {
        ledger.running.wrappingAdd(1, ordering: .sequentiallyConsistent)
        if ledger.barrierRunning.load(ordering: .sequentiallyConsistent) {
            report.exclusionViolations.increment()
        }
        ledger.running.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        ledger.finish(for: producer)
    }

    /// A barrier submitted as a producer's `sequence`-th item on this queue runs after exactly
    /// `sequence` of that producer's items have finished (all earlier ones, no later one).
    private static func runBarrier(_ ledger: LeafLedger, producer: Int, sequence: Int, report: StressReport) {
        ledger.barrierRunning.store(true, ordering: .sequentiallyConsistent)
        if ledger.running.load(ordering: .sequentiallyConsistent) != 0 {
            report.exclusionViolations.increment()
        }
        if ledger.finishedCount(of: producer) != sequence {
            report.barrierEarlyOrLate.increment()
        }
        ledger.barrierRunning.store(false, ordering: .sequentiallyConsistent)
        ledger.finish(for: producer)
    }

    /// Ten thousand queues, each released at once with items still pending: none is dropped.
    func testReleasedQueuesRunEveryPendingItem() {
        let done = Counter()
        let queues = 10_000
        let itemsPerQueue = 10
        for i in 0..<queues {
            let queue = DispatchQueue(label: "stress.released\(i)", attributes: i % 2 == 0 ? [] : .concurrent)
            for _ in 0..<itemsPerQueue {
                queue.async { done.increment() }
            }
        }
        XCTAssertTrue(waitForCount(done, toReach: queues * itemsPerQueue), "\(done.value) of \(queues * itemsPerQueue) ran")
    }

    /// Groups and semaphores under load: many short items, each in a group, each signalling.
    func testGroupsAndSemaphoresUnderLoad() {
        let group = DispatchGroup()
        let semaphore = DispatchSemaphore(value: 0)
        let queues = (0..<16).map {
            DispatchQueue(label: "stress.sync\($0)", attributes: $0 % 2 == 0 ? [] : .concurrent)
        }
        let items = 100_000
        for i in 0..<items {
            queues[i % queues.count].async(group: group) { semaphore.signal() }
        }
        var taken = 0
        while taken < items, semaphore.wait(timeout: .now() + patience) == .success {
            taken += 1
        }
        XCTAssertEqual(taken, items)
        XCTAssertEqual(group.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
    }
}
