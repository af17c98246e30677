// DispatchQueue.concurrentPerform: every index in 0..<iterations runs exactly once, and the
// call returns only after all of them have finished.

import Glibc
import GrandCentral
import Synchronization
import XCTest

/// One counter per index, so that a lost or duplicated iteration shows up as 0 or 2.
final class IndexCounts: @unchecked Sendable {
    let count: Int
    private let slots: UnsafeMutablePointer<Atomic<Int>>

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        for i in 0..<count { (slots + i).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    func hit(_ index: Int) {
        slots[index].wrappingAdd(1, ordering: .relaxed)
    }

    subscript(index: Int) -> Int { slots[index].load(ordering: .relaxed) }

    /// Indices whose count is not `expected`, at most `limit` of them.
    func mismatches(expected: Int = 1, limit: Int = 10) -> [(index: Int, count: Int)] {
        var found: [(Int, Int)] = []
        for i in 0..<count where self[i] != expected {
            found.append((i, self[i]))
            if found.count == limit { break }
        }
        return found
    }
}

final class ApplyTests: XCTestCase {

    func testEveryIndexRunsExactlyOnce() {
        let counts = IndexCounts(count: 10_000)
        DispatchQueue.concurrentPerform(iterations: counts.count) { counts.hit($0) }
        XCTAssertTrue(counts.mismatches().isEmpty, "indices run other than once: \(counts.mismatches())")
    }

    func testZeroIterationsRunNothing() {
        let calls = Counter()
        DispatchQueue.concurrentPerform(iterations: 0) { _ in calls.increment() }
        XCTAssertEqual(calls.value, 0)
    }

    func testOneIteration() {
        let seen = Recorder<Int>()
        DispatchQueue.concurrentPerform(iterations: 1) { seen.append($0) }
        XCTAssertEqual(seen.values, [0])
    }

    func testReturnsOnlyAfterEveryIterationFinished() {
        let finished = Counter()
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            if index % 8 == 0 { sleep(milliseconds: 10) }
            finished.increment()
        }
        XCTAssertEqual(finished.value, 64)
    }

    func testManyIterations() {
        let sum = Atomic<Int>(0)
        let iterations = 1_000_000
        DispatchQueue.concurrentPerform(iterations: iterations) { index in
            sum.wrappingAdd(index, ordering: .relaxed)
        }
        XCTAssertEqual(sum.load(ordering: .relaxed), iterations * (iterations - 1) / 2)
    }

    /// With more than one CPU, iterations run in parallel: two that wait for each other meet.
    func testIterationsRunInParallel() throws {
        try XCTSkipIf(onlineCPUs < 2, "needs two CPUs")
        let arrived = Counter()
        let met = Counter()
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            arrived.increment()
            if eventually(within: patience, { arrived.value == 2 }) { met.increment() }
        }
        XCTAssertEqual(met.value, 2, "the two iterations never ran at the same time")
    }

    func testNestedConcurrentPerform() {
        let counts = IndexCounts(count: 20 * 30)
        DispatchQueue.concurrentPerform(iterations: 20) { outer in
            DispatchQueue.concurrentPerform(iterations: 30) { inner in
                counts.hit(outer * 30 + inner)
            }
        }
        XCTAssertTrue(counts.mismatches().isEmpty, "\(counts.mismatches())")
    }

    func testConcurrentPerformInsideAQueueItem() {
        let counts = IndexCounts(count: 1000)
        let finished = Flag()
        let queue = DispatchQueue(label: "test.apply.inside")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 1)
        queue.async {
            DispatchQueue.concurrentPerform(iterations: counts.count) { counts.hit($0) }
            finished.open()
        }
        XCTAssertTrue(finished.wait())
        XCTAssertTrue(counts.mismatches().isEmpty, "\(counts.mismatches())")
    }

    func testConcurrentPerformFromSeveralThreadsAtOnce() {
        let counts = (0..<3).map { _ in IndexCounts(count: 5000) }
        let threads = counts.map { c in
            TestThread { DispatchQueue.concurrentPerform(iterations: c.count) { c.hit($0) } }
        }
        threads.forEach { $0.join() }
        for c in counts {
            XCTAssertTrue(c.mismatches().isEmpty, "\(c.mismatches())")
        }
    }
}
