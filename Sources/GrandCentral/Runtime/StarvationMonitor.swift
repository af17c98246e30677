import CGrandCentral
import Glibc
import Synchronization

/// Notices work starving behind workers blocked where the library cannot see (read,
/// usleep, a lock) and adds threads, up to the pool's limit.
///
/// The monitor thread sleeps until a producer finds no idle worker (`poke`). Then, every
/// `tick`, while queued work is waiting and no worker is idle, it asks the kernel which
/// busy workers are actually runnable (/proc/self/task/<tid>/stat, as libdispatch's
/// Linux workqueue does once a second); if fewer than `activeCPUs` are, CPU is going
/// unused while work waits, so it starts the difference. Reading /proc costs a few
/// microseconds per worker, so it happens only while starvation is plausible.
///
/// The rejected alternative — "no item completed for N ms" — stalls when many workers
/// sleep: completions keep trickling in from the sleepers and the pool stops growing.
final class StarvationMonitor: @unchecked Sendable {
    let tick: Int64 = 1_000_000
    /// Futex word: 1 while the monitor sleeps waiting for a poke.
    private let parked: UnsafeMutablePointer<UInt32> = {
        let p = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        p.initialize(to: 0)
        return p
    }()
    private let started = Atomic<Bool>(false)

    /// A producer found no idle worker and could not start one.
    @inline(__always)
    func poke() {
        if started.load(ordering: .relaxed) && gc_word_load(parked) == 0 { return }
        pokeSlow()
    }

    @inline(never)
    func pokeSlow() {
        if !started.load(ordering: .relaxed) {
            if !started.exchange(true, ordering: .acquiringAndReleasing) {
                _ = gc_thread_create(monitorMain, Unmanaged.passUnretained(self).toOpaque(), "gc.monitor")
            }
            return
        }
        if gc_word_load(parked) == 1 && gc_word_cas(parked, 1, 0) {
            gc_futex_wake(parked, 1)
        }
    }

    fileprivate func run() {
        let pool = ThreadPool.shared
        var quietTicks = 0
        while true {
            _ = gc_futex_wait(parked, 2, tick)   // never equal to 2: a plain sleep of one tick
            let starving = pool.hasWork() && pool.idle.load(ordering: .relaxed) == 0
            if !starving {
                quietTicks += 1
                if quietTicks >= 10 {
                    // Sleep until a producer pokes us.
                    gc_word_store(parked, 1)
                    if !(pool.hasWork() && pool.idle.load(ordering: .relaxed) == 0) {
                        while gc_word_load(parked) == 1 { _ = gc_futex_wait(parked, 1, -1) }
                    } else {
                        gc_word_store(parked, 0)
                    }
                    quietTicks = 0
                }
                continue
            }
            quietTicks = 0
            let threads = pool.threads.load(ordering: .relaxed)
            if threads >= pool.threadLimit { continue }
            var runnable = 0
            // Every worker counts: one looking for work is runnable too, and will take it.
            for worker in pool.snapshotWorkers() {
                if gc_thread_is_runnable(worker.tid.load(ordering: .relaxed)) { runnable += 1 }
            }
            let missing = pool.activeCPUs - runnable
            if missing > 0 {
                for _ in 0..<missing where !pool.startWorker() { break }
            }
        }
    }
}

private let monitorMain: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    Unmanaged<StarvationMonitor>.fromOpaque(context!).takeUnretainedValue().run()
}
