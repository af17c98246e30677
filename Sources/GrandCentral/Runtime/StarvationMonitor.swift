import CGrandCentral
import Glibc
import Synchronization

/// Notices work starving behind workers blocked where the library cannot see (read,
/// usleep, a lock) and adds threads, up to the pool's limit.
///
/// The monitor thread sleeps until a producer finds no idle worker (`poke`). Then, every
/// `tick`, while queued work is waiting and no worker is idle, it counts the workers that
/// are *stuck*: busy with the same item for `stuckAfterTicks` ticks (their `itemsRun` has
/// not moved) and not runnable according to the kernel (/proc/self/task/<tid>/stat, as
/// libdispatch's Linux workqueue does once a second). If fewer than `activeCPUs` workers
/// are not stuck, CPUs are going unused while work waits, so it starts the difference —
/// or as many workers as are stuck, if that is more, so the pool doubles per round.
/// Reading /proc costs a few microseconds per worker, so it happens only while
/// starvation is plausible.
///
/// A worker blocked in `futex` must stay blocked much longer (`stuckAfterTicksInFutex`,
/// a second — libdispatch's own pace) before it counts: that is where threads queue for a
/// lock (malloc's arena lock, under allocation-heavy load, convoys for hundreds of
/// milliseconds: seen with 200,000 queues created on one thread and freed on others),
/// and more threads only lengthen the queue. A futex wait that is really a wait for other
/// work (a condition variable signalled by a queued item) still gets its thread, after
/// that second. The library's own waits never get here: they announce themselves
/// (BlockingRegion) and are replaced at once.
///
/// Rejected alternatives: "no item completed for N ms" stalls when many workers sleep
/// (completions keep trickling in from the sleepers, and the pool stops growing short of
/// what the work needs); "not runnable right now" alone counts a worker that waits a
/// microsecond for malloc's lock as blocked, and under allocation-heavy load the pool
/// snowballs to its limit.
final class StarvationMonitor: @unchecked Sendable {
    let tick: Int64 = 1_000_000
    /// A worker counts as stuck after this many ticks blocked on one item: shorter waits
    /// (malloc's arena lock while its holder is preempted) resolve themselves.
    let stuckAfterTicks = 2
    let stuckAfterTicksInFutex = 1000
    let futexSyscall = gc_futex_syscall_number()
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
        if started.load(ordering: .relaxed) && gc_word_load_seq_cst(parked) == 0 { return }
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
        if gc_word_load_seq_cst(parked) == 1 && gc_word_cas(parked, 1, 0) {
            gc_futex_wake(parked, 1)
        }
    }

    fileprivate func run() {
        let pool = ThreadPool.shared
        var quietTicks = 0
        while true {
            // One tick: `parked` is 0 while the monitor is active, so this sleeps until the
            // timeout (FUTEX_WAIT returns at once only when the word differs).
            _ = gc_futex_wait(parked, 0, tick)
            let starving = pool.hasWork() && pool.idle.load(ordering: .sequentiallyConsistent) == 0
            if !starving {
                quietTicks += 1
                if quietTicks >= 10 {
                    // Sleep until a producer pokes us. Publishing `parked` and then looking
                    // for work, against a producer's push and then its look at `parked`, is
                    // a Dekker pair: both sides sequentially consistent.
                    _ = gc_word_exchange_seq_cst(parked, 1)
                    if !(pool.hasWork() && pool.idle.load(ordering: .sequentiallyConsistent) == 0) {
                        while gc_word_load_seq_cst(parked) == 1 { _ = gc_futex_wait(parked, 1, -1) }
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
            var progressing = 0
            var stuck = 0
            for worker in pool.snapshotWorkers() {
                let run = worker.itemsRun.load(ordering: .relaxed)
                let sameItem = run == worker.itemsSeenByMonitor
                worker.itemsSeenByMonitor = run
                // One looking for work, or one that finished an item since the last tick,
                // or one the kernel says is runnable, is not stuck.
                if !worker.busy.load(ordering: .relaxed) || !sameItem
                    || gc_thread_is_runnable(worker.tid.load(ordering: .relaxed)) {
                    worker.stuckTicks = 0
                    progressing += 1
                } else {
                    worker.stuckTicks += 1
                    var threshold = stuckAfterTicks
                    if worker.stuckTicks >= stuckAfterTicks
                        && gc_thread_blocked_syscall(worker.tid.load(ordering: .relaxed)) == futexSyscall {
                        threshold = stuckAfterTicksInFutex
                    }
                    if worker.stuckTicks >= threshold { stuck += 1 } else { progressing += 1 }
                }
            }
            let missing = pool.activeCPUs - progressing
            if missing > 0 {
                // Grow by as many as are stuck (doubling): blocking work tends to come in
                // bulk, and growing by a CPU's worth per round would take
                // `threadLimit / activeCPUs` rounds to reach the limit.
                let add = max(missing, stuck)
                for _ in 0..<add where !pool.startWorker() { break }
            }
        }
    }
}

private let monitorMain: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    Unmanaged<StarvationMonitor>.fromOpaque(context!).takeUnretainedValue().run()
}
