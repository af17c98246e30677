// The thread pool's promises through the Swift API: serial queues (overcommit) get a thread
// each whenever no worker is idle, so items that wait for each other all start; workers on
// the global queue that block where the library cannot see are replaced. The C side, with
// the thread limit and dispatch_queue_set_width, is ctests/pool.c.

import Glibc
import GrandCentral
import XCTest

/// A rendezvous on a pthread condition variable (which the library cannot see): each
/// arriving item waits until `expected` have arrived, or gives up after `patience`.
private final class Rendezvous: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var arrived = 0  // guarded by `mutex`
    let expected: Int
    let passed = Counter()
    let gaveUp = Counter()

    init(expected: Int) {
        self.expected = expected
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    func arrive() {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        deadline.tv_sec += Int(patience)
        pthread_mutex_lock(mutex)
        arrived += 1
        if arrived >= expected { pthread_cond_broadcast(cond) }
        var rc: Int32 = 0
        while arrived < expected && rc != ETIMEDOUT { rc = pthread_cond_timedwait(cond, mutex, &deadline) }
        let all = arrived >= expected
        pthread_mutex_unlock(mutex)
        _ = all ? passed.increment() : gaveUp.increment()
    }

    var finished: Int { passed.value + gaveUp.value }
}

final class ThreadPoolTests: XCTestCase {
    func testTwoHundredSerialQueuesThatWaitForEachOtherAllStart() {
        let n = 200
        let rendezvous = Rendezvous(expected: n)
        let queues = (0..<n).map { DispatchQueue(label: "test.pool.rendezvous\($0)") }
        for queue in queues { queue.async { rendezvous.arrive() } }
        XCTAssertTrue(eventually(within: patience + 10) { rendezvous.finished == n })
        XCTAssertEqual(rendezvous.passed.value, n, "items on serial queues did not all run at once")
    }

    func testHundredSerialQueuesWaitingOnAConditionSignalledLast() {
        let n = 100
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
        let signalled = Unprotected(false)  // guarded by `mutex`
        let released = Counter()
        let waiters = (0...n).map { DispatchQueue(label: "test.pool.signal\($0)") }
        let pointers = Unprotected((mutex, cond))
        for queue in waiters.dropLast() {
            queue.async {
                let (mutex, cond) = pointers.value
                pthread_mutex_lock(mutex)
                while !signalled.value { pthread_cond_wait(cond, mutex) }
                pthread_mutex_unlock(mutex)
                _ = released.increment()
            }
        }
        waiters.last!.async {
            let (mutex, cond) = pointers.value
            pthread_mutex_lock(mutex)
            signalled.value = true
            pthread_cond_broadcast(cond)
            pthread_mutex_unlock(mutex)
        }
        XCTAssertTrue(eventually(within: 10) { released.value == n }, "\(released.value) of \(n) released")
        if released.value == n {
            pthread_cond_destroy(cond)
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            cond.deallocate()
        }
    }

    func testGlobalQueueWorkersBlockedInReadAreReplaced() {
        // As many blockers as could plausibly occupy every worker, then a probe behind them.
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let readEnd = fds[0], writeEnd = fds[1]
        let blockers = 8
        let started = Counter()
        let done = Counter()
        let probe = Flag()
        for _ in 0..<blockers {
            DispatchQueue.global().async {
                _ = started.increment()
                var byte: UInt8 = 0
                _ = read(readEnd, &byte, 1)
                _ = done.increment()
            }
        }
        DispatchQueue.global().async { probe.open() }
        XCTAssertTrue(probe.wait(timeout: patience), "an item waited forever behind workers blocked in read")
        XCTAssertTrue(eventually { started.value == blockers })
        var bytes = [UInt8](repeating: 0, count: blockers)
        XCTAssertEqual(write(writeEnd, &bytes, blockers), blockers)
        XCTAssertTrue(eventually { done.value == blockers })
        close(readEnd)
        close(writeEnd)
    }

    /// Workers that only nap (short sleeps between bursts of a little work) hold their
    /// threads without using their CPUs: an item queued behind them on the same global queue
    /// still runs. (In a fresh process the pool used to leave it queued for as long as the
    /// nappers ran; here, after other tests, idle workers may serve it anyway: the C test
    /// ctests/engine_promises.c is the one that fails on that pool. This one runs the
    /// monitor's napping rule under the sanitizers.)
    func testAnItemBehindNappingWorkersRuns() {
        let nappers = 8
        let stop = Flag()
        let stopped = Counter()
        for _ in 0..<nappers {
            DispatchQueue.global().async {
                while !stop.isOpen { usleep(300) }
                _ = stopped.increment()
            }
        }
        let probe = Flag()
        DispatchQueue.global().async { probe.open() }
        XCTAssertTrue(probe.wait(timeout: patience), "an item waited behind napping workers")
        stop.open()
        XCTAssertTrue(eventually { stopped.value == nappers })
    }

    /// Items on the utility queue that wait for each other all start while the default
    /// queue is kept full of sleeping items: a root left waiting behind a higher one is
    /// served (the monitor's third rule; see the previous test for why this one is mostly
    /// for the sanitizers).
    func testUtilityItemsBesideAFullDefaultQueueAllStart() {
        let stop = Flag()
        let fed = Counter()
        @Sendable func feed() {
            usleep(2000)
            _ = fed.increment()
            if !stop.isOpen { DispatchQueue.global().async { feed() } }
        }
        for _ in 0..<8 { DispatchQueue.global().async { feed() } }
        let parties = 3
        let rendezvous = Rendezvous(expected: parties)
        for _ in 0..<parties { DispatchQueue.global(qos: .utility).async { rendezvous.arrive() } }
        XCTAssertTrue(eventually(within: patience + 10) { rendezvous.finished == parties })
        XCTAssertEqual(rendezvous.passed.value, parties, "utility items did not all run beside the full default queue")
        stop.open()
    }

    /// After a burst has started several workers, a trickle of one item per millisecond is
    /// served by the worker that parked last (ParkedWorkers wakes the newest first), not by
    /// every parked worker in turn, so the others stay asleep and retire after the idle
    /// timeout. (Waking the oldest first, the 200 items below ran on all eight workers.)
    func testATrickleAfterABurstIsServedByTheWorkerThatParkedLast() {
        let burst = 8
        let started = Counter()
        let release = Flag()
        for _ in 0..<burst {
            DispatchQueue.global().async {
                _ = started.increment()
                _ = release.wait()
            }
        }
        XCTAssertTrue(eventually { started.value == burst }, "the burst did not get \(burst) workers")
        release.open()
        usleep(20_000)  // the burst's workers park
        let threads = Recorder<UInt>()
        let queue = DispatchQueue(label: "test.pool.trickle")
        for _ in 0..<200 {
            let done = Flag()
            queue.async {
                threads.append(UInt(pthread_self()))
                done.open()
            }
            XCTAssertTrue(done.wait())
            usleep(1000)
        }
        let distinct = Set(threads.values.suffix(150)).count
        XCTAssertLessThanOrEqual(distinct, 3, "the trickle ran on \(distinct) threads")
    }
}
