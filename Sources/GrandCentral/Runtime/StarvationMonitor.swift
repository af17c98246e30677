import CGrandCentral
import Glibc
import Synchronization

/// Watches for queued work that no thread is serving and adds threads, up to the pool's
/// limit: the part of `ThreadPool`'s policy that needs eyes on the workers.
///
/// When it watches. The monitor thread sleeps on a futex until a producer finds no idle
/// worker and cannot start one (`poke`). Then it wakes every `tick` (1 ms) while work is
/// queued and no worker is parked; after ten quiet ticks it goes back to sleep, so an idle
/// process uses no CPU.
///
/// What it watches, each tick, for every busy worker: whether it is on the same item as
/// at the last sample (`itemsRun`), and how much CPU its thread used since then (its
/// CPU-time clock, `pthread_getcpuclockid`: one system call, no file). A worker on the same
/// item is *computing* if it used at least half a tick of CPU, and *stalled* if it used
/// none; a worker stalled for `stalledSamplesToBlock` samples (two, so it has not run at
/// all for at least a whole tick) is *genuinely blocked* unless the kernel lists it as
/// runnable (/proc/self/task/<tid>/stat, read only for such workers and only while the
/// answer is still needed) — runnable means it waits for a CPU, and a new thread would not
/// help. A condition variable, a semaphore, a futex, `read`, `usleep`: blocked after two
/// samples. A lock (a glibc mutex or any lowlevellock such as malloc's arena lock, a
/// priority-inheritance mutex such as Swift's `Mutex`; told apart by the futex operation in
/// /proc/self/task/<tid>/syscall) only after `lockStalledSamples` (~20 ms): see below.
/// Workers in the library's own waits (`BlockingRegion`) are blocked after two samples
/// whatever they wait on. A worker on the same item that used a little CPU, less than
/// 1/`nappingShare` of the time since the last sample, for two samples is *napping* (short
/// sleeps between short bursts of work) and is judged as a stalled one is, by what it is
/// doing at the sample: asleep, not runnable and not waiting for a lock, it is blocked too.
/// (Without this, four items looping on `usleep(200)` and a merge into a data source held
/// both threads of a 2-CPU pool for as long as they ran, and the source's drain, queued
/// behind them on the same global queue, never ran: each used a little CPU every tick, so
/// it counted as running.)
///
/// What it adds, each tick (nothing while a thread it or a producer started has not yet
/// looked for work — `ThreadPool.starting` — so one slow `pthread_create` is not answered
/// twice):
///
/// 1. Overcommit: if items wait on the overcommit roots and none was taken from them for
///    `stalledSamplesToBlock` samples, start one thread per worker that is computing or
///    genuinely blocked, up to the number of waiting items. Each such worker holds its
///    thread for long, and an overcommit item is owed a thread whenever none is idle; the
///    pool at most doubles per round. 100 serial queues whose items wait on one condition
///    variable get their 100 threads in a few tens of milliseconds (libdispatch: ~15 ms).
///
/// 2. Non-overcommit: if items wait on a non-overcommit root, count the non-overcommit
///    workers that are not genuinely blocked (and workers between items) and start the
///    difference to `activeCPUs`. A worker blocked on a global queue is replaced after two
///    to three ticks; 200 items that each usleep 20 ms finish in ~0.1 s (libdispatch
///    adds one thread a second: ~1.3 s).
///
/// 3. A root left waiting behind higher ones: if a root has had items and no pop for
///    `waitingBehindTicks` ticks while a root above it had work (items, or pops), the next
///    worker that looks for work takes one item from it first (`ThreadPool.favoredRoot`;
///    the highest such root, one item per decision). Workers take the highest QoS first, so
///    a default queue kept full of sleeping items would otherwise leave a utility queue's
///    items waiting for ever however many threads rules 1 and 2 add; libdispatch gives each
///    QoS its own threads on Linux and runs them. Only a root below every root a busy
///    worker serves is favored: a root the workers are already busy with (or are busy
///    below) is not waiting behind higher work, and favoring it would invert priorities.
///
/// Why this does not snowball (the reason the old monitor waited a whole second before it
/// counted a worker blocked in `futex`). Under allocation-heavy load — 200,000 serial
/// queues created on one thread and freed on workers (`bench` queue_cycle) — workers queue
/// on malloc's arena lock. A waiter in such a convoy is woken each time the lock changes
/// hands or it is its turn, so its CPU clock moves from tick to tick (a little: it counts
/// neither as blocked nor as computing). The overcommit rule also needs the overcommit
/// roots to have made no progress at all for two samples, which a convoy that hands the
/// lock on does not do. Measured on 2 CPUs with a compiler loading both: queue_cycle ends
/// with 4-6 workers (libdispatch: 255, its limit, and 6-10× slower); with one sample
/// instead of two, one run in three grew to ~60. Locks that hand over in FIFO order (PI
/// mutexes: Swift's `Mutex`) do not wake their waiters until their turn, and with a lock
/// holder preempted by another process a glibc mutex's waiters can sleep several ticks
/// too: 200,000 global-queue items that each take one mutex grew the pool to 50-90
/// threads under a loaded machine when those waits counted after two samples. Hence the
/// 20 ms for lock waits, and only while no worker progresses: under ThreadSanitizer every
/// `static let` access in a debug build takes a global PI lock (`swift_once`'s slow
/// path), and with a 20 ms rule alone the test suite's stress tests still convoyed the
/// pool to its limit. A napping worker (rule above) is judged by the same lock test: a
/// convoy waiter that uses a little CPU each tick is asleep in a lock wait at the sample,
/// or runnable, and is not counted as blocked.
///
/// Rejected alternatives:
/// - "Not runnable at two samples a tick apart" (the previous rule) counts a convoy
///   waiter that happens to be asleep at both samples as blocked; under allocation-heavy
///   load the pool snowballed to its limit. It needed a one-second exception for futex
///   waits, which left condition-variable and mutex waits unreplaced for a second.
/// - Never replacing workers that wait for a lock: a mutex held by a thread that waits
///   for queued work would deadlock. The lock-wait test itself reads glibc's futex
///   protocol (value 2 = locked with waiters); a wait it misjudges as a lock wait is only
///   replaced later (20 ms), never not at all.
/// - "No item completed for N ms": stalls when many workers sleep (completions keep
///   trickling in from the sleepers, and the pool stops growing short of what the work
///   needs).
/// - The process's total CPU time against `activeCPUs`: another process's load makes our
///   workers look blocked, and the pool grows exactly when the machine is busiest.
/// - Starting an overcommit thread on every push that finds no idle worker: see
///   `ThreadPool` (libdispatch reaches 255 threads on queue_cycle that way).
///
/// Cost: while it watches and work is waiting, one `clock_gettime` of a thread CPU clock
/// per busy worker per tick, plus a /proc read per long-stalled one while its answer is
/// needed; nothing per item on any hot path but relaxed counters: one per push onto an
/// overcommit root, one per pop from any root (a plain store under the pop lock), and one
/// relaxed load of `favoredRoot` per look for work.
final class StarvationMonitor: @unchecked Sendable {
    let tick: Int64 = 1_000_000
    /// Consecutive samples a tick apart with no progress before the monitor acts: a
    /// worker with no CPU time on the same item, or overcommit roots with no pop. Two
    /// (at least a full tick between them): with one, the pool grew to ~60 threads on
    /// queue_cycle while a compiler loaded both CPUs (waiters on malloc's lock whose
    /// holder was preempted for a tick looked blocked).
    let stalledSamplesToBlock = 2
    /// Samples a worker asleep waiting for a *lock* (a glibc mutex, malloc's arena lock, a
    /// PI mutex such as Swift's `Mutex`: `gc_thread_in_lock_wait`) must stay so before it
    /// counts as blocked: about 20 ms — and even then only in a tick in which no busy
    /// worker made progress (finished an item or used CPU). A waiter in a convoy gets the
    /// lock within that, or some worker (the holder) is getting somewhere; a mutex held by
    /// a thread that waits for queued work leaves every worker stalled.
    let lockStalledSamples = 20
    /// A worker on the same item that used less than 1/`nappingShare` of the time since the
    /// last sample on a CPU, for `stalledSamplesToBlock` samples, is *napping* (a loop of
    /// short sleeps: `usleep(200)` and a little work uses ~5%) unless the kernel lists it as
    /// runnable or it waits for a lock: it counts as blocked. 1/8: a computing worker on a
    /// CPU shared with another process still gets more than that, and is runnable when it
    /// does not.
    let nappingShare: Int64 = 8
    /// Ticks a root must be left waiting, with a higher-QoS root busy, before the next
    /// worker looking for work is sent to it (`ThreadPool.favoredRoot`).
    let waitingBehindTicks = 2
    /// Quiet ticks before the monitor goes back to sleep.
    let quietTicksBeforeSleep = 10
    /// Ticks while nothing starves but some worker is busy, only to name long-running
    /// workers (ThreadNames).
    let namingTick: Int64 = 4_000_000
    /// Futex word: 0 while the monitor ticks every `tick`; 1 while it sleeps waiting for a
    /// poke; 2 while it dozes (ticks every `namingTick`: nothing starves, a worker is busy),
    /// which a poke also ends.
    private let parked: UnsafeMutablePointer<UInt32> = {
        let p = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        p.initialize(to: 0)
        return p
    }()
    private let started = Atomic<Bool>(false)

    /// The child of a fork: the monitor thread is the parent's; the next poke starts one.
    func resetInForkChild() {
        parked.pointee = 0
        started.store(false, ordering: .relaxed)
    }

    /// A producer found no idle worker and could not start one.
    @inline(__always)
    func poke() {
        // `parked` seq-cst: the producer's push (its seq-cst tail exchange), then this load,
        // against `sleepUntilPoked`'s exchange of `parked`, then its look for work (Dekker).
        if started.load(ordering: .relaxed) && gc_word_load_seq_cst(parked) == 0 { return }
        pokeSlow()
    }

    @inline(never)
    func pokeSlow() {
        if !started.load(ordering: .relaxed) {
            // acquiringAndReleasing: one poker wins the start; pairs with the releasing
            // store below of a failed start (and the next winner's exchange).
            if !started.exchange(true, ordering: .acquiringAndReleasing) {
                // The event thread before the monitor (it serves timers, and runs the work
                // while no worker can start); a failed start is retried by the next poke.
                if !EventLoop.shared.ensureThread()
                    || gc_thread_create(monitorMain, Unmanaged.passUnretained(self).toOpaque(), ThreadNames.monitor) != 0 {
                    started.store(false, ordering: .releasing)
                }
            }
            return
        }
        // Seq-cst load, then a CAS that ends a sleep (1) or a doze (2): pairs with the
        // monitor's exchanges of `parked` (`sleepUntilPoked`, `run`'s doze).
        let word = gc_word_load_seq_cst(parked)
        if word != 0 && gc_word_cas(parked, word, 0) {
            gc_futex_wake(parked, 1)
        }
    }

    /// A worker took an item after parking (or as its first): wake the monitor if it
    /// sleeps, so the worker is named if the item runs long. Cold: after a futex wake. The
    /// fence pairs with the one in `sleepUntilPoked` (the worker's `busy` store against the
    /// monitor's `parked` store).
    func workerWoke() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if started.load(ordering: .relaxed) && gc_word_load_seq_cst(parked) != 1 { return }
        pokeSlow()
    }

    /// Sleeps until poked, unless work starves or a worker is busy after all.
    private func sleepUntilPoked(_ pool: ThreadPool) {
        // Publishing `parked` and then looking for work, against a producer's push and then
        // its look at `parked`, is a Dekker pair: both sides sequentially consistent.
        _ = gc_word_exchange_seq_cst(parked, 1)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let busy = pool.snapshotWorkers().contains { $0.busy.load(ordering: .relaxed) }
        // `idle` seq-cst: pairs with a worker's seq-cst increment when it parks (ThreadPool).
        if !busy && !(pool.hasWork() && pool.idle.load(ordering: .sequentiallyConsistent) == 0) {
            while gc_word_load_seq_cst(parked) == 1 { _ = gc_futex_wait(parked, 1, -1) }
        } else {
            // Releasing: pairs with `poke`'s load; a poker that reads 0 knows the monitor ticks.
            gc_word_store(parked, 0)
        }
    }

    /// Names the workers that have run one root item for `ThreadNames.nameAfter` after
    /// it (ThreadNames). Returns whether any worker is busy.
    private func nameWorkers(_ pool: ThreadPool) -> Bool {
        var anyBusy = false
        let now = Int64(bitPattern: gc_uptime_ns())
        for worker in pool.snapshotWorkers() where worker.busy.load(ordering: .relaxed) {
            anyBusy = true
            let items = worker.itemsRun.load(ordering: .relaxed)
            if items != worker.itemsSeenByNamer {
                worker.itemsSeenByNamer = items
                worker.itemSeenSince = now
                continue
            }
            if now - worker.itemSeenSince < ThreadNames.nameAfter { continue }
            if worker.nameLock.withLock({ worker.name == .busy(item: items) }) { continue }
            let name = ThreadNames.busyName(for: worker)
            worker.nameLock.withLock {
                // Still on that item (it renames itself idle under this lock when it parks).
                guard worker.busy.load(ordering: .relaxed),
                      worker.itemsRun.load(ordering: .relaxed) == items else { return }
                worker.name = .busy(item: items)
                _ = gc_thread_set_name(worker.tid.load(ordering: .relaxed), name)
            }
        }
        return anyBusy
    }

    fileprivate func run() {
        let pool = ThreadPool.shared
        var quietTicks = 0
        var lastOvercommitPops = RootQueues.overcommitPops()
        var unservedTicks = 0
        while true {
            // One tick: `parked` is 0 while the monitor is active (2 while it dozes), so this
            // sleeps until the timeout (FUTEX_WAIT returns at once only when the word differs,
            // and when a poke changed it).
            // Seq-cst: pairs with a poker's CAS 2 → 0 (`pokeSlow`).
            let dozing = gc_word_load_seq_cst(parked) == 2
            _ = gc_futex_wait(parked, dozing ? 2 : 0, dozing ? namingTick : tick)
            // `idle` seq-cst: pairs with the workers' RMWs of it when they park and leave idle.
            let starving = pool.hasWork() && pool.idle.load(ordering: .sequentiallyConsistent) == 0
            let anyBusy = nameWorkers(pool)
            if !starving {
                if dozing && gc_word_load_seq_cst(parked) == 2 {
                    if !anyBusy {
                        sleepUntilPoked(pool)
                        lastOvercommitPops = RootQueues.overcommitPops()
                    }
                    continue
                }
                quietTicks += 1
                if quietTicks >= quietTicksBeforeSleep {
                    if anyBusy {
                        // Doze: only workers to name. A poke (CAS 2 → 0) ends it.
                        _ = gc_word_exchange_seq_cst(parked, 2)
                    } else {
                        sleepUntilPoked(pool)
                    }
                    quietTicks = 0
                    lastOvercommitPops = RootQueues.overcommitPops()
                }
                continue
            }
            if dozing { gc_word_store(parked, 0) }  // releasing: pairs with `poke`'s load, as above
            quietTicks = 0
            favorRootWaitingBehind(pool)
            let overcommitPops = RootQueues.overcommitPops()
            unservedTicks = overcommitPops != lastOvercommitPops ? 0 : unservedTicks + 1
            lastOvercommitPops = overcommitPops
            let threads = pool.threads.load(ordering: .relaxed)
            if threads >= pool.threadLimit {
                if pool.debug { pool.logLimitReached(RootQueues.overcommitPending() > 0 ? .overcommitUnserved : .workersBlocked) }
                continue
            }
            if pool.starting.load(ordering: .relaxed) > 0 { continue }

            let pending = RootQueues.overcommitPending()
            let wantOvercommit = pending > 0 && unservedTicks >= stalledSamplesToBlock
            let wantConstrained = RootQueues.constrainedHasWork()
            if !wantOvercommit && !wantConstrained { continue }
            let survey = surveyWorkers(pool, overcommitPending: wantOvercommit ? pending : 0)
            // Overcommit first, then non-overcommit; the two loops only so that each start's
            // debug line names its rule.
            let addOvercommit = wantOvercommit ? min(pending, survey.stuck) : 0
            let addConstrained = wantConstrained ? max(0, pool.activeCPUs - survey.constrainedRunning) : 0
            var stopped = false
            for _ in 0..<addOvercommit where !pool.startWorker(.overcommitUnserved) {
                stopped = true
                break
            }
            if !stopped {
                for _ in 0..<addConstrained where !pool.startWorker(.workersBlocked) { break }
            }
        }
    }

    /// Items popped from each root (`scanOrder` order) at the last tick that looked, and
    /// for how many ticks since each root has had items and none was popped.
    private var rootPopsSeen = [UInt64](repeating: 0, count: RootQueues.all.count)
    private var rootWaitingTicks = [Int](repeating: 0, count: RootQueues.all.count)

    /// Rule 3 (see the type's comment): finds the highest-QoS root that has had items and
    /// no pop for `waitingBehindTicks` ticks while a root above it had work, and sends the
    /// next worker that looks for work to it (`ThreadPool.favoredRoot`).
    private func favorRootWaitingBehind(_ pool: ThreadPool) {
        var workAbove = false
        var chosen = -1
        // The lowest root (highest `scanOrder` index) a busy worker is serving. A root at or
        // above it is not left behind higher ones: the pool is busy with it, or with lower
        // work (favoring it then would hand the workers to a low root while a higher one
        // starves: background items of 200 ms kept user-interactive items waiting ~1 s).
        var lowestServed = -1
        for worker in pool.snapshotWorkers() where worker.busy.load(ordering: .relaxed) {
            lowestServed = max(lowestServed, pool.scanOrder.count - 1 - worker.rootIndex.load(ordering: .relaxed))
        }
        for (i, root) in pool.scanOrder.enumerated() {
            let (empty, pops) = root._withUnsafeGuaranteedRef { ($0.isEmptyRoot, $0.pops.load(ordering: .relaxed)) }
            let served = pops != rootPopsSeen[i]
            rootPopsSeen[i] = pops
            if empty || served {
                rootWaitingTicks[i] = 0
            } else {
                rootWaitingTicks[i] += 1
                if workAbove && chosen < 0 && rootWaitingTicks[i] >= waitingBehindTicks && i > lowestServed {
                    chosen = i
                    rootWaitingTicks[i] = 0
                }
            }
            if !empty || served { workAbove = true }
        }
        if chosen >= 0 {
            pool.favoredRoot.store(chosen, ordering: .relaxed)
            if pool.debug {
                DebugLog.pool("root \(DebugLog.rootName(index: pool.scanOrder.count - 1 - chosen)) waited behind "
                    + "higher-QoS work for \(waitingBehindTicks) ticks: the next free worker takes its item")
            }
        }
    }

    /// What the workers are doing since the last sample (see the type's comment).
    struct Survey {
        /// Workers on the same item as at the last sample that are computing (used at least
        /// half a tick of CPU since) or genuinely blocked: each is a reason for one more
        /// overcommit thread. Counted only up to the overcommit items waiting.
        var stuck = 0
        /// Workers looking for work, and workers on a non-overcommit item that are not
        /// genuinely blocked: the non-overcommit roots' running threads. Counted only up
        /// to `activeCPUs`.
        var constrainedRunning = 0
    }

    private func surveyWorkers(_ pool: ThreadPool, overcommitPending: Int) -> Survey {
        var survey = Survey()
        /// Same item, no CPU used since the last sample: blocked or waiting for a CPU.
        var stalled: [(worker: Worker, overcommit: Bool)] = []
        /// Some busy worker finished an item or used CPU since the last sample: if workers
        /// wait for a lock, its holder is getting somewhere (a convoy, not a deadlock).
        var anyWorkerProgressed = false
        let now = Int64(bitPattern: gc_uptime_ns())
        for worker in pool.snapshotWorkers() {
            if !worker.busy.load(ordering: .relaxed) {
                survey.constrainedRunning += 1  // between items: it will take one
                continue
            }
            let items = worker.itemsRun.load(ordering: .relaxed)
            let cpu = worker.cpuTime()
            let sameItem = items == worker.itemsSeenByMonitor
            let cpuUsed = worker.cpuSeenByMonitor >= 0 && cpu >= 0 ? cpu - worker.cpuSeenByMonitor : -1
            // The time the CPU figure covers: a tick, or more when samples were skipped.
            let interval = max(tick, now - worker.cpuSampledAtByMonitor)
            worker.itemsSeenByMonitor = items
            worker.cpuSeenByMonitor = cpu
            worker.cpuSampledAtByMonitor = now
            let overcommit = worker.servingOvercommit.load(ordering: .relaxed)
            if !sameItem || cpuUsed != 0 {
                worker.stalledSamplesByMonitor = 0
                anyWorkerProgressed = true
            }
            if !sameItem || cpuUsed <= 0 || cpuUsed * nappingShare >= interval {
                worker.nappingSamplesByMonitor = 0
            }
            if !sameItem || cpuUsed < 0 {
                if !overcommit { survey.constrainedRunning += 1 }
            } else if cpuUsed == 0 {
                worker.stalledSamplesByMonitor += 1
                if worker.stalledSamplesByMonitor >= stalledSamplesToBlock {
                    stalled.append((worker, overcommit))
                } else if !overcommit {
                    survey.constrainedRunning += 1
                }
            } else if cpuUsed * nappingShare < interval {
                // Ran a little on the same item: napping (short sleeps between short bursts),
                // or cycling through a lock convoy. After two such samples it is judged as a
                // stalled worker is, by what it is doing now: asleep and not waiting for a
                // lock means a napper, which holds its thread without using its CPU.
                worker.nappingSamplesByMonitor += 1
                if worker.nappingSamplesByMonitor >= stalledSamplesToBlock {
                    stalled.append((worker, overcommit))
                } else if !overcommit {
                    survey.constrainedRunning += 1
                }
            } else {
                // Ran a good part of the tick on the same item: computing (at least half a
                // tick: it holds its thread for long), or between that and napping.
                if cpuUsed >= tick / 2 { survey.stuck += 1 }
                if !overcommit { survey.constrainedRunning += 1 }
            }
        }
        for (worker, overcommit) in stalled {
            let needStuck = survey.stuck < overcommitPending
            let needRunning = !overcommit && survey.constrainedRunning < pool.activeCPUs
            if !needStuck && !needRunning { continue }
            // Off the CPU for a whole tick: runnable means it waits for a CPU (the machine is
            // busy: a new thread would not help); otherwise it is blocked — unless it waits
            // for a lock and has not waited `lockStalledSamples` yet (a convoy, see above).
            let tid = worker.tid.load(ordering: .relaxed)
            let waitingForLock = !worker.inBlockingRegion.load(ordering: .relaxed)
                && (worker.stalledSamplesByMonitor < lockStalledSamples || anyWorkerProgressed)
                && gc_thread_in_lock_wait(tid) != 0
            if waitingForLock || gc_thread_is_runnable(tid) {
                if !overcommit { survey.constrainedRunning += 1 }
            } else {
                survey.stuck += 1
            }
        }
        return survey
    }
}

private let monitorMain: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    Unmanaged<StarvationMonitor>.fromOpaque(context!).takeUnretainedValue().run()
}
