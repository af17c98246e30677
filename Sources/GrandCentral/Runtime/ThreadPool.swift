import CGrandCentral
import Glibc
import Synchronization

/// The thread pool under the root queues.
///
/// Policy: keep as many workers *running* as the process has CPUs (`activeCPUs`, which
/// respects affinity and the cgroup quota). A worker that finds no work spins briefly, then
/// parks on `idleSemaphore`; a producer that pushes onto a root queue wakes a parked worker
/// if there is one, or starts a thread if fewer than `activeCPUs` are running. Workers that
/// block in the library's own waits say so (`workerWillBlock`), which frees their CPU slot
/// at once. Blocking the library cannot see (read, usleep, a lock) is caught by the
/// starvation monitor (`StarvationMonitor`). Threads never number more than `threadLimit`
/// (64, or GRANDCENTRAL_THREAD_LIMIT), and a worker parked for `idleTimeout` exits.
///
/// Counters (all atomics, any thread):
/// - `threads`: live workers; a starter increments before creating, a worker decrements on exit.
/// - `idle`: workers parked or committed to parking. A producer that takes a unit of `idle`
///   (CAS down) owes that worker one `idleSemaphore.signal()`; a worker that leaves idle on
///   its own (found work on its re-check, or timed out) takes its unit back the same way, and
///   if it cannot (a producer took it) it consumes the signal that is on its way.
/// - `blocked`: workers inside a BlockingRegion.
final class ThreadPool: @unchecked Sendable {
    static let shared = ThreadPool()

    let activeCPUs: Int
    let threadLimit: Int
    let idleTimeout: Int64 = 5_000_000_000

    let threads = Atomic<Int>(0)
    let idle = Atomic<Int>(0)
    let blocked = Atomic<Int>(0)
    let idleSemaphore = FutexSemaphore(value: 0)

    /// Live workers, for the monitor. Guarded by `workersLock`.
    private var workers: [Worker] = []
    private let workersLock = SpinLock()
    let monitor = StarvationMonitor()

    private init() {
        activeCPUs = Int(gc_active_cpu_count())
        var limit = 64
        if let raw = getenv("GRANDCENTRAL_THREAD_LIMIT"), let value = Int(String(cString: raw)), value > 0 {
            limit = value
        }
        threadLimit = max(limit, 1)
    }

    // MARK: Producers

    /// Called after every push onto a root queue.
    @inline(__always)
    func workAvailable() {
        var n = idle.load(ordering: .sequentiallyConsistent)
        while n > 0 {
            let (done, now) = idle.weakCompareExchange(expected: n, desired: n - 1, ordering: .sequentiallyConsistent)
            if done {
                _ = idleSemaphore.signal()
                return
            }
            n = now
        }
        workAvailableNoIdleWorker()
    }

    /// Work is queued and a CPU may be free for it (a worker just took an item and more
    /// remain, or a worker is about to block): bring in a parked worker, a new one if
    /// fewer than `activeCPUs` run, or let the monitor judge.
    @inline(__always)
    func moreWorkQueued() {
        if idle.load(ordering: .sequentiallyConsistent) > 0 {
            workAvailable()
        } else if threads.load(ordering: .relaxed) - blocked.load(ordering: .relaxed) < activeCPUs {
            workAvailableNoIdleWorker()
        } else {
            monitor.poke()
        }
    }

    @inline(never)
    func workAvailableNoIdleWorker() {
        let running = threads.load(ordering: .relaxed) - blocked.load(ordering: .relaxed)
        if running < activeCPUs && startWorker() { return }
        monitor.poke()
    }

    /// Starts one worker unless at the limit. Returns whether it did.
    @discardableResult
    func startWorker() -> Bool {
        var n = threads.load(ordering: .relaxed)
        while true {
            if n >= threadLimit { return false }
            let (done, now) = threads.weakCompareExchange(expected: n, desired: n + 1, ordering: .relaxed)
            if done { break }
            n = now
        }
        let worker = Worker(pool: self)
        let context = Unmanaged.passRetained(worker).toOpaque()
        if gc_thread_create(workerMain, context, "gc.worker") != 0 {
            Unmanaged<Worker>.fromOpaque(context).release()
            threads.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    // MARK: Workers

    func register(_ worker: Worker) { workersLock.withLock { workers.append(worker) } }
    func unregister(_ worker: Worker) { workersLock.withLock { workers.removeAll { $0 === worker } } }
    func snapshotWorkers() -> [Worker] { workersLock.withLock { workers } }

    /// Takes the next item, highest QoS first.
    @inline(__always)
    func findWork() -> Continuation? {
        for queue in RootQueues.scanOrder {
            if let node = queue._withUnsafeGuaranteedRef({ $0.popRoot() }) { return node }
        }
        return nil
    }

    @inline(__always)
    func hasWork() -> Bool {
        for queue in RootQueues.scanOrder where !queue._withUnsafeGuaranteedRef({ $0.items.isEmpty }) { return true }
        return false
    }

    // MARK: Blocking

    static func workerWillBlock(_ raw: UnsafeMutableRawPointer) {
        let pool = ThreadPool.shared
        pool.blocked.wrappingAdd(1, ordering: .relaxed)
        // This worker's CPU is free while it waits: let queued work have it.
        if pool.hasWork() { pool.moreWorkQueued() }
    }

    static func workerDidUnblock(_ raw: UnsafeMutableRawPointer) {
        ThreadPool.shared.blocked.wrappingSubtract(1, ordering: .relaxed)
    }
}

/// One pool thread. `busy`, `itemsRun` and `tid` are written by the worker and read by the
/// monitor; `itemsSeenByMonitor` and `stuckTicks` belong to the monitor alone.
final class Worker: @unchecked Sendable {
    let pool: ThreadPool  // immortal; a strong let costs no reference counting to read
    let busy = Atomic<Bool>(false)
    let itemsRun = Atomic<UInt64>(0)
    let tid = Atomic<Int32>(0)
    var itemsSeenByMonitor: UInt64 = 0
    var stuckTicks = 0
    init(pool: ThreadPool) { self.pool = pool }

    func run() {
        tid.store(gc_thread_id(), ordering: .relaxed)
        pool.register(self)
        let thread = gc_thread_self()!
        thread.pointee.worker = Unmanaged.passUnretained(self).toOpaque()
        // Workers fill their caches by recycling before they ever allocate: make sure the
        // cache is freed when this thread exits after its idle timeout.
        gc_thread_register_cache_cleanup()
        while true {
            if let node = pool.findWork() {
                busy.store(true, ordering: .relaxed)
                // More queued behind this one: make sure a peer comes for it (producers
                // only wake a worker on a root queue's empty → non-empty transition).
                if pool.hasWork() { pool.moreWorkQueued() }
                runContinuation(node)
                // Only this thread writes it; the monitor reads it.
                itemsRun.store(itemsRun.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
                continue
            }
            busy.store(false, ordering: .relaxed)
            if spinForWork() { continue }
            if !park() { break }
        }
        thread.pointee.worker = nil
        pool.unregister(self)
        pool.threads.wrappingSubtract(1, ordering: .relaxed)
        // A producer may have counted on us between our last look and our exit.
        if pool.hasWork() { pool.workAvailable() }
    }

    /// About 5-10 µs of pause instructions: long enough to catch a producer that is
    /// feeding a queue, short enough not to steal its CPU (2 cores, producers and workers
    /// compete for them).
    let spinIterations = 64

    /// Spins a few microseconds before parking: a queue that refills quickly (a producer
    /// feeding a serial queue) is picked up without a futex round trip.
    @inline(__always)
    func spinForWork() -> Bool {
        for _ in 0..<spinIterations {
            if pool.hasWork() { return true }
            gc_cpu_relax()
        }
        return false
    }

    /// Parks until woken. Returns false when the worker should exit (idle timeout).
    func park() -> Bool {
        pool.idle.wrappingAdd(1, ordering: .sequentiallyConsistent)
        // Re-check after announcing ourselves idle: a producer that pushed before our
        // increment did not see us, so we must see its item (Dekker with workAvailable).
        if pool.hasWork() {
            if leaveIdle() { return true }
            _ = pool.idleSemaphore.wait(timeoutNanoseconds: -1)  // a producer took our unit
            return true
        }
        if pool.idleSemaphore.wait(timeoutNanoseconds: pool.idleTimeout) { return true }
        // Timed out: exit, unless a producer took our unit meanwhile (then its signal is
        // coming, and it expects a worker).
        if leaveIdle() { return false }
        _ = pool.idleSemaphore.wait(timeoutNanoseconds: -1)
        return true
    }

    /// Takes this worker's unit of `idle` back; false if a producer already took it.
    private func leaveIdle() -> Bool {
        var n = pool.idle.load(ordering: .sequentiallyConsistent)
        while n > 0 {
            let (done, now) = pool.idle.weakCompareExchange(expected: n, desired: n - 1, ordering: .sequentiallyConsistent)
            if done { return true }
            n = now
        }
        return false
    }
}

private let workerMain: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    let worker = Unmanaged<Worker>.fromOpaque(context!).takeRetainedValue()
    worker.run()
}
