import Glibc
import Synchronization
import XCTest
@testable import GrandCentral

// `ParkedWorkers`, where the pool's idle workers sleep: a counting semaphore (no signal is
// lost or counted twice, a timed-out wait takes nothing) that wakes the most recently
// parked waiter first.

final class ParkedWorkersTests: XCTestCase {
    /// Parks `count` threads one after another (each linked before the next starts) and
    /// returns them with the order in which they came back.
    private func parkInOrder(_ parked: ParkedWorkers, count: Int, woken: Recorder<Int>) -> [TestThread] {
        var threads: [TestThread] = []
        for i in 0..<count {
            threads.append(TestThread {
                let slot = ParkedWorkers.Slot.allocate()
                defer { slot.deallocate() }
                if parked.wait(slot, timeoutNanoseconds: -1) { woken.append(i) }
            })
            XCTAssertTrue(eventually { parked.parkedCount == i + 1 }, "waiter \(i) never parked")
        }
        return threads
    }

    func testTheMostRecentlyParkedIsWokenFirst() {
        let parked = ParkedWorkers()
        let woken = Recorder<Int>()
        let threads = parkInOrder(parked, count: 4, woken: woken)
        for expected in [3, 2, 1, 0] {
            parked.signal()
            XCTAssertTrue(eventually(within: 5) { woken.values.last == expected && woken.values.count == 4 - expected },
                          "after a signal: woken \(woken.values), expected \(expected) last")
        }
        for thread in threads { thread.join() }
        XCTAssertEqual(woken.values, [3, 2, 1, 0])
        XCTAssertEqual(parked.parkedCount, 0)
    }

    func testASignalWithNobodyParkedIsKeptForTheNextWait() {
        let parked = ParkedWorkers()
        let slot = ParkedWorkers.Slot.allocate()
        defer { slot.deallocate() }
        parked.signal()
        parked.signal()
        XCTAssertTrue(parked.wait(slot, timeoutNanoseconds: 0))
        XCTAssertTrue(parked.wait(slot, timeoutNanoseconds: 1_000_000))
        let start = monotonicNanoseconds()
        XCTAssertFalse(parked.wait(slot, timeoutNanoseconds: 20_000_000), "a third wait had nothing to take")
        XCTAssertGreaterThanOrEqual(monotonicNanoseconds() - start, 20_000_000)
        XCTAssertEqual(parked.parkedCount, 0, "a timed-out waiter unlinks itself")
    }

    func testATimedOutWaiterInTheMiddleLeavesTheOthersLinked() {
        let parked = ParkedWorkers()
        let woken = Recorder<Int>()
        let first = parkInOrder(parked, count: 1, woken: woken)
        let timedOut = TestThread {
            let slot = ParkedWorkers.Slot.allocate()
            defer { slot.deallocate() }
            if !parked.wait(slot, timeoutNanoseconds: 30_000_000) { woken.append(-1) }
        }
        XCTAssertTrue(eventually { parked.parkedCount == 2 })
        let last = TestThread {
            let slot = ParkedWorkers.Slot.allocate()
            defer { slot.deallocate() }
            if parked.wait(slot, timeoutNanoseconds: -1) { woken.append(2) }
        }
        XCTAssertTrue(eventually { parked.parkedCount == 3 || woken.values.contains(-1) })
        timedOut.join()
        XCTAssertEqual(woken.values, [-1])
        XCTAssertTrue(eventually { parked.parkedCount == 2 })
        parked.signal()
        XCTAssertTrue(eventually(within: 5) { woken.values.count == 2 }, "a signal woke nobody")
        XCTAssertEqual(woken.values, [-1, 2], "the signal woke another waiter than the newest")
        parked.signal()
        last.join()
        for thread in first { thread.join() }
        XCTAssertEqual(woken.values, [-1, 2, 0])
    }

    /// Waiters with short timeouts race signallers, 10^5 signals in all: every signal is
    /// taken by exactly one wait (a wait that returned true), once the waiters have drained
    /// what is left; a timed-out wait took nothing.
    func testEverySignalIsTakenExactlyOnceUnderRacingTimeouts() {
        let parked = ParkedWorkers()
        let signals = 100_000
        let signallers = 2, waiters = 3
        let taken = Counter()
        let stop = Flag()
        var threads: [TestThread] = []
        for _ in 0..<waiters {
            threads.append(TestThread {
                let slot = ParkedWorkers.Slot.allocate()
                defer { slot.deallocate() }
                var timeout: Int64 = 0
                while true {
                    // Timeouts of 0 to 3 µs: many expire while a signal is on its way.
                    if parked.wait(slot, timeoutNanoseconds: timeout) {
                        _ = taken.increment()
                    } else if stop.isOpen {
                        return
                    }
                    timeout = (timeout + 1_000) % 4_000
                }
            })
        }
        for _ in 0..<signallers {
            threads.append(TestThread {
                for i in 0..<(signals / signallers) {
                    parked.signal()
                    if i % 64 == 0 { sched_yield() }
                }
            })
        }
        for thread in threads.suffix(signallers) { thread.join() }
        XCTAssertTrue(waitForCount(taken, toReach: signals), "signals taken: \(taken.value) of \(signals)")
        stop.open()
        for thread in threads.prefix(waiters) { thread.join() }
        XCTAssertEqual(taken.value, signals, "signals taken: \(taken.value) of \(signals)")
        XCTAssertEqual(parked.parkedCount, 0)
    }
}
