// Small tools the tests share. They are built on the standard library, Synchronization and
// pthreads only, never on the library under test: a test that waits for GrandCentral with
// GrandCentral's own semaphore would hang, not fail, when that semaphore is broken.

import Glibc
import Synchronization
import XCTest

/// How long anything that should happen "soon" may take before a test gives up. Generous on
/// purpose: tests measure order and counts, never speed (DESIGN.md, hard rule 7).
let patience: Double = 30

/// How long a test watches for something that must NOT happen (an item running on a suspended
/// queue, a sync returning early). Long enough that a broken engine is caught in practice.
let quietPeriodMilliseconds = 200

/// Polls `condition` every millisecond until it holds or `timeout` seconds pass.
func eventually(within timeout: Double = patience, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
    while !condition() {
        if monotonicNanoseconds() > deadline { return condition() }
        usleep(1000)
    }
    return true
}

/// Waits until `counter` reaches `total`. Gives up only when the count has not moved for
/// `stallTimeout` seconds, so a slow run (ThreadSanitizer, a loaded machine) still passes while
/// a run that has lost work fails within a minute.
func waitForCount(_ counter: Counter, toReach total: Int, stallTimeout: Double = 60) -> Bool {
    var lastValue = counter.value
    var lastChange = monotonicNanoseconds()
    while lastValue < total {
        usleep(2000)
        let value = counter.value
        let now = monotonicNanoseconds()
        if value != lastValue {
            lastValue = value
            lastChange = now
        } else if now - lastChange > UInt64(stallTimeout * 1e9) {
            return false
        }
    }
    return true
}

func sleep(milliseconds: Int) {
    usleep(UInt32(milliseconds * 1000))
}

/// CLOCK_MONOTONIC, read directly: the tests' own clock, independent of DispatchTime.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func currentThread() -> pthread_t {
    pthread_self()
}

/// A shared integer.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)

    init() {}

    /// Adds one and returns the new value.
    @discardableResult
    func increment() -> Int {
        storage.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
    }

    var value: Int { storage.load(ordering: .sequentiallyConsistent) }
}

/// A one-way switch: closed until `open()`, then open forever.
final class Flag: Sendable {
    private let storage = Atomic<Bool>(false)

    init() {}

    func open() { storage.store(true, ordering: .sequentiallyConsistent) }

    var isOpen: Bool { storage.load(ordering: .sequentiallyConsistent) }

    /// Blocks the calling thread until the flag opens; false if `timeout` passed first.
    @discardableResult
    func wait(timeout: Double = patience) -> Bool {
        eventually(within: timeout) { isOpen }
    }
}

/// A pthread mutex. Not `Synchronization.Mutex`: under contention that one hands the lock over
/// through a priority-inheritance futex, inside the kernel, where ThreadSanitizer cannot see
/// the hand-off, so TSan reports false races on the data it protects.
final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// An append-only log, for checking the order in which items ran.
final class Recorder<Element: Sendable>: @unchecked Sendable {
    private let lock = Lock()
    private var storage: [Element] = []  // protected by `lock`

    init() {}

    func append(_ element: Element) {
        lock.withLock { storage.append(element) }
    }

    var values: [Element] { lock.withLock { storage } }

    var count: Int { lock.withLock { storage.count } }
}

/// Measures how many items run at the same time: call `enter()` when an item starts and
/// `leave()` when it ends; `peak` is the most that were ever inside at once.
final class ConcurrencyProbe: Sendable {
    private let inside = Atomic<Int>(0)
    private let highWater = Atomic<Int>(0)

    init() {}

    func enter() {
        let now = inside.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
        var seen = highWater.load(ordering: .sequentiallyConsistent)
        while now > seen {
            let (exchanged, original) = highWater.compareExchange(
                expected: seen, desired: now, ordering: .sequentiallyConsistent)
            if exchanged { break }
            seen = original
        }
    }

    func leave() {
        inside.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    var current: Int { inside.load(ordering: .sequentiallyConsistent) }

    var peak: Int { highWater.load(ordering: .sequentiallyConsistent) }

    /// Runs `body` between `enter()` and `leave()`, spinning a little so that overlapping
    /// items have a real chance to be seen overlapping.
    func measure(spinMicroseconds: UInt64 = 200, _ body: () -> Void = {}) {
        enter()
        spin(microseconds: spinMicroseconds)
        body()
        leave()
    }
}

/// Busy-waits without blocking the thread (a blocked worker may be replaced; a busy one not).
func spin(microseconds: UInt64) {
    let end = monotonicNanoseconds() + microseconds * 1000
    while monotonicNanoseconds() < end {}
}

/// A value with no synchronisation of its own. Tests use it where the library under test is
/// what must provide the happens-before edges (a serial queue, a semaphore used as a lock), so
/// that ThreadSanitizer checks the library's ordering, not ours.
final class Unprotected<Value>: @unchecked Sendable {
    var value: Value

    init(_ value: Value) { self.value = value }
}

/// A plain pthread, for producers and waiters that must not be GrandCentral workers.
final class TestThread: @unchecked Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private var handle = pthread_t()
    private var joined = false

    init(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(&handle, nil, { raw in
            Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }

    deinit { join() }
}

/// The number of CPUs online (an upper bound on real parallelism).
var onlineCPUs: Int {
    Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}

struct TestError: Error, Equatable {
    let code: Int
}
