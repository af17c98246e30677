// DispatchSemaphore: the initial value counts permits, wait(timeout:) times out no earlier
// than its deadline, a signal is never lost, signal() reports whether it woke a thread.
// Every test gives back what it took: libdispatch aborts on releasing a semaphore whose value
// is below the one it was created with.

import Glibc
import GrandCentral
import XCTest

final class SemaphoreTests: XCTestCase {

    func testInitialValueIsTheNumberOfWaitsThatSucceedAtOnce() {
        let semaphore = DispatchSemaphore(value: 3)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
        for _ in 0..<3 { semaphore.signal() }
    }

    func testWaitTimesOutWithoutASignal() {
        let semaphore = DispatchSemaphore(value: 0)
        let start = monotonicNanoseconds()
        XCTAssertEqual(semaphore.wait(timeout: .now() + .milliseconds(100)), .timedOut)
        XCTAssertGreaterThanOrEqual(monotonicNanoseconds() - start, 99_000_000, "wait gave up before its deadline")
    }

    func testWaitWithAPastDeadlineTimesOutAtOnce() {
        let semaphore = DispatchSemaphore(value: 0)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
        XCTAssertEqual(semaphore.wait(timeout: .now() - .seconds(5)), .timedOut)
        XCTAssertEqual(semaphore.wait(timeout: DispatchTime(uptimeNanoseconds: 1)), .timedOut)
    }

    /// A timed-out wait must not consume a later signal.
    func testTimedOutWaitLeavesTheCountAlone() {
        let semaphore = DispatchSemaphore(value: 0)
        XCTAssertEqual(semaphore.wait(timeout: .now() + .milliseconds(10)), .timedOut)
        semaphore.signal()
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
    }

    func testSignalBeforeWaitIsRemembered() {
        let semaphore = DispatchSemaphore(value: 0)
        semaphore.signal()
        semaphore.signal()
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .success)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
    }

    func testSignalWakesABlockedWaiter() {
        let semaphore = DispatchSemaphore(value: 0)
        let woke = Flag()
        let waiter = TestThread {
            semaphore.wait()
            woke.open()
        }
        sleep(milliseconds: 50)
        XCTAssertFalse(woke.isOpen)
        semaphore.signal()
        XCTAssertTrue(woke.wait())
        waiter.join()
    }

    func testSignalReportsWhetherItWokeAThread() {
        let idle = DispatchSemaphore(value: 0)
        XCTAssertEqual(idle.signal(), 0, "signal woke a thread although nobody waited")
        idle.wait()

        let semaphore = DispatchSemaphore(value: 0)
        let woke = Flag()
        let waiter = TestThread {
            semaphore.wait()
            woke.open()
        }
        // Give the waiter ample time to block; there is no way to observe that it has.
        sleep(milliseconds: 300)
        XCTAssertNotEqual(semaphore.signal(), 0, "signal did not report waking the blocked thread")
        XCTAssertTrue(woke.wait())
        waiter.join()
    }

    func testEveryWaiterIsWokenByItsOwnSignal() {
        let semaphore = DispatchSemaphore(value: 0)
        let woken = Counter()
        let waiters = (0..<8).map { _ in
            TestThread {
                semaphore.wait()
                woken.increment()
            }
        }
        sleep(milliseconds: 50)
        for n in 1...8 {
            semaphore.signal()
            XCTAssertTrue(eventually { woken.value >= n })
        }
        waiters.forEach { $0.join() }
        XCTAssertEqual(woken.value, 8)
        XCTAssertEqual(semaphore.wait(timeout: .now()), .timedOut)
    }

    /// A semaphore of value 1 is a lock: the counter has none of its own, so ThreadSanitizer
    /// checks that wait/signal order the accesses.
    func testSemaphoreOfOneIsALock() {
        let semaphore = DispatchSemaphore(value: 1)
        let total = Unprotected(0)
        let probe = ConcurrencyProbe()
        let threads = (0..<4).map { _ in
            TestThread {
                for _ in 0..<5000 {
                    semaphore.wait()
                    probe.enter()
                    total.value += 1
                    probe.leave()
                    semaphore.signal()
                }
            }
        }
        threads.forEach { $0.join() }
        semaphore.wait()
        XCTAssertEqual(total.value, 20000)
        semaphore.signal()
        XCTAssertEqual(probe.peak, 1)
    }

    func testPingPongBetweenTwoThreads() {
        let ping = DispatchSemaphore(value: 0)
        let pong = DispatchSemaphore(value: 0)
        let rounds = 10_000
        let volleys = Unprotected(0)
        let partner = TestThread {
            for _ in 0..<rounds {
                ping.wait()
                volleys.value += 1
                pong.signal()
            }
        }
        for _ in 0..<rounds {
            ping.signal()
            XCTAssertEqual(pong.wait(timeout: .now() + patience), .success)
        }
        partner.join()
        XCTAssertEqual(volleys.value, rounds)
    }

    func testCountingSemaphoreLimitsConcurrency() {
        let slots = DispatchSemaphore(value: 2)
        let queue = DispatchQueue(label: "test.semaphore.limit", attributes: .concurrent)
        let probe = ConcurrencyProbe()
        let done = Counter()
        for _ in 0..<40 {
            queue.async {
                slots.wait()
                probe.measure(spinMicroseconds: 500)
                slots.signal()
                done.increment()
            }
        }
        XCTAssertTrue(eventually { done.value == 40 })
        XCTAssertLessThanOrEqual(probe.peak, 2)
    }

    /// Pool workers blocked in a semaphore wait must not starve the item that will signal it.
    func testWorkersBlockedOnASemaphoreDoNotStarveTheSignaller() {
        let semaphore = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "test.semaphore.starve", attributes: .concurrent)
        let waiters = 4 * max(onlineCPUs, 1)
        let woken = Counter()
        for _ in 0..<waiters {
            queue.async {
                semaphore.wait()
                woken.increment()
            }
        }
        queue.async {
            for _ in 0..<waiters { semaphore.signal() }
        }
        XCTAssertTrue(eventually(within: 60) { woken.value == waiters }, "only \(woken.value) of \(waiters) waiters were woken")
    }
}
