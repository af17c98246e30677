import CGrandCentral
import Glibc
import Synchronization

/// The thread pool under the root queues, and its policy: which roots get threads, how
/// many, and when a thread is added or retired. (The starvation monitor, which carries
/// out the part of the policy that needs watching, is in `StarvationMonitor.swift`.)
///
/// Roots. Two per QoS bucket (`RootQueues`): *overcommit* (serial queues, the main
/// queue's target, `DISPATCH_QUEUE_OVERCOMMIT`) and *non-overcommit* (concurrent queues,
/// `dispatch_get_global_queue(qos, 0)`). One pool of workers serves all twelve; a worker
/// takes the highest-QoS item first, overcommit before non-overcommit within a bucket —
/// except that a root whose items the monitor saw wait two ticks with no pop while a root
/// above it had work is *favored* (`favoredRoot`): the next worker that looks for work
/// takes one item from it first. A lower-QoS root thus never waits for ever behind higher
/// roots kept full (of sleepers, say: a `dispatch_apply` on the utility queue whose
/// iterations wait for each other completes beside a default queue full of napping items,
/// as under libdispatch, which gives every QoS its own threads on Linux).
///
/// How many threads, as libdispatch promises:
/// - Non-overcommit: about one *running* thread per CPU (`activeCPUs`, which respects
///   affinity and the cgroup quota). A worker blocked in the library's own waits says so
///   (`BlockingRegion` → `workerWillBlock`) and frees its CPU slot at once; a worker
///   blocked where the library cannot see (read, usleep, a mutex, a condition variable) is
///   noticed by the monitor within a couple of milliseconds and replaced. So is a worker
///   that only *naps*: on one item, asleep, waking now and then for a little work (a loop
///   of `usleep(200)` and a `dispatch_source_merge_data`) — it holds its thread but not its
///   CPU, and the items behind it (that source's drain) get a thread.
/// - Overcommit: an item waiting on an overcommit root gets a thread of its own within a
///   few milliseconds whenever no worker is idle, even if every worker is busy computing
///   or blocked. That is what lets 250 serial queues whose items wait for each other all
///   run, as they do under libdispatch.
/// - Never more than `threadLimit` workers: 255, libdispatch's limit, or the positive
///   integer in the environment variable `GRANDCENTRAL_THREAD_LIMIT`, read once, when the
///   library first needs a thread. At the limit, work waits in its queue for a worker to
///   come free; it is never dropped.
///
/// When a thread is added:
/// - A producer that makes a root non-empty (`workAvailable`), or a worker that takes an
///   item and sees more behind it (`moreWorkQueued`), does nothing if a worker is spinning
///   (it takes the item), else wakes a parked worker if there is one, else starts a thread
///   if fewer than `activeCPUs` workers are running (not counted as blocked), else pokes
///   the monitor.
/// - The monitor, every millisecond while work waits and no worker is idle, starts
///   threads for overcommit items when the overcommit roots have gone unserved for two
///   samples, replaces non-overcommit workers that are genuinely blocked or napping, and
///   favors a root left waiting behind higher ones (see `StarvationMonitor` for the rules
///   and why they do not snowball under lock convoys).
///
/// When a thread is retired: a worker that finds no work spins briefly (`spinForWork`:
/// at most `maxSpinners` at once, for at most `spinBudget`, see "Spinning" below), then
/// parks in `parked`; parked for `idleTimeout` (5 s), it exits. An idle process therefore
/// ends with no workers and a sleeping monitor: no CPU at all. `parked` wakes the worker
/// that parked last (`ParkedWorkers`), so a trickle of work after a burst keeps one warm
/// thread busy and lets the others reach the timeout: after a burst that started 10
/// workers, a 1 ms timer's handler ran on all of them in turn when the oldest was woken
/// first, and 8 s later all were alive (13 threads in the process); woken newest first it
/// ran on one, and 5 threads were left. (Lateness of that handler: the same either way.)
///
/// Run queues: where work waits, and who may touch it. Work that has not started is in
/// exactly one of two places: the item list of one of the twelve root queues, or an
/// ordinary queue's own list, which the pool never sees (an ordinary queue with work is one
/// item, its drain, on its target's list, so a serial queue's FIFO is its own list's order
/// and nothing here can reorder it). A root's list (`RootQueue`, `ContinuationList`'s protocol): any thread
/// pushes (one atomic exchange); consumers take turns under the root's `popLock` — any
/// worker, and the event thread while no worker can start (`takeWorkWithoutWorker`). There
/// is nothing per worker: no local queue, no LIFO slot. So an item not yet started is
/// always where every worker, and every thread the monitor adds, can take it, which the
/// blocked-worker and overcommit rules (`StarvationMonitor`) count on.
///
/// Spinning. A worker spins only after it has run work, never while parked, so a process
/// whose pool has nothing to do spends nothing on it. At most `maxSpinners` (half the CPUs,
/// at least one) spin at once; a spinner looks for work between pause instructions for
/// `spinPauseBudget` (5 µs), then between `sched_yield`s until `spinBudget` (20 µs) has
/// passed since it began, so a runnable thread on its CPU (the producer, another process)
/// gets the CPU back at the next look. A producer that makes a root non-empty during the
/// first phase wakes no one (`workAvailable`, `moreWorkQueued`): the spinner takes the
/// item, and if more are behind it wakes a peer as any worker does. During the yielding
/// phase the worker no longer counts as a spinner and producers wake parked workers as
/// usual: on a loaded machine a yield can take the worker off its CPU for a whole time
/// slice, and an item must not wait for that. (Except while the event thread polls after
/// a delivery, which it does only while it finds the CPUs uncontended: `yieldersTakeWork`.)
/// That one rule is also the event thread's hand-off: a source drain it pushes while a worker spins goes to that
/// worker without a futex wake. The cost: up to 20 µs of one CPU each time a worker runs
/// out of work (the last 15 µs yielding to anything runnable), by at most half the CPUs'
/// workers, paid only by a process that runs work; in return a producer that feeds the pool
/// one item at a time pays no futex wake and the worker no sleep and wake-up per item.
/// Measured on the drop-in task group (100,000 children, 2 CPUs, load 9-15): the previous
/// rule (64 pauses, about 2 µs, by every idle worker, and a futex wake per empty → non-empty
/// push) made 22,000-35,000 context switches and used 264-355 ms of CPU (libdispatch:
/// 28,000-41,000 and 279-313 ms); this rule 400-920 switches and 170-222 ms in 12 runs of
/// 13 (one, 13,500 and 326 ms: spinners preempted on a loaded machine); a 50 µs budget
/// 510-570 switches and 194-197 ms, so the budget stays at 20 µs. `async let` ×4: 5,900 →
/// 30-100 switches, CPU 49-71 → 30-34 ms; concurrentPerform(1000): 1,100 → 60 switches,
/// 18 → 14 ms. The fan-out and 200 × usleep(20 ms) rows do not move (best of 4: 18.8 /
/// 18.3 Mitems/s; 151 / 151 ms), and 500 ms of idleness after a burst of work cost 0.02 ms
/// of CPU (ctests/pool idle-after-work).
///
/// Rejected: per-worker run queues (a local ring per worker that others steal from, a LIFO
/// slot for the item a worker just made ready, at most half the workers searching: tokio,
/// Go). Weighed against profiles, not built:
/// - The fan-out row (1M `dispatch_group_async_f` from the main thread; bench group_async
///   and fanout_openmp) is fed by a thread that is not a worker, so its items enter through
///   a root whatever workers hold. Local queues amortize the pop lock only if workers take
///   items from the root in batches, and a batch a worker holds where the monitor cannot
///   see it breaks the rules above: 200 items that each usleep 20 ms, taken 8 at a time,
///   would sleep 8 in a row on one thread (the sleepers row). What the row costs, and what
///   was done about it, is under "The fan-out row" below.
/// - The Swift task group (the drop-in's row): GrandCentral's code is 4% of its CPU
///   samples (libdispatch's, 7% of the same binary's); the kernel is 53% (page faults and
///   mprotect as malloc's per-thread arenas grow and shrink: children are allocated on one
///   thread and freed on another), libc's malloc 20%, the Swift runtime 14%. What the pool
///   decides there is which thread runs what and how often threads sleep, and spinning
///   took that (above).
/// - A LIFO slot others cannot take (tokio's) strands its item behind a worker that blocks
///   where the library cannot see (an item that submits work and then waits on a condition
///   variable for it waits for the item in its own slot) unless the monitor learns to steal
///   it; a slot others can take is emptied at once by a spinning worker, which is what
///   spinning already does without one.
///
/// The fan-out row (2 CPUs; one thread submits 1M `dispatch_group_async_f` of a counter
/// bump to the default global queue, then waits; OpenMP's yardstick is 1M `omp task` on
/// the same CPUs). The submitting thread is the bottleneck: before the levers below it
/// spent 41-50 ns per item submitting and 3-5 ns waiting for the tail (load 5). Its own CPU time per item
/// (CLOCK_THREAD_CPUTIME_ID over the loop) is 15-24 ns; the rest of the wall clock is
/// cache lines it waits for, each written by a worker the item before: the node (recycled
/// by a worker into its cache, handed back through the depot), the root's list, and the
/// group's state word (the producer's enter against each worker's leave). A locked
/// instruction waits for the stores before it, so in the profile the misses showed up at
/// the group's `lock xadd` and the root's tail exchange. Three levers paid, each measured
/// alternating with the build before it (load 14-18, so best and median of 12-14 runs):
/// - the root's list with the producer's fields (`tail`, `pushes`) and the consumers'
///   (`head`, the pop lock, `pops`) on separate lines, and consumers reading `head`
///   before `tail` (RootQueue): 53.3 -> 50.0 ns/item best, 59.3 -> 54.1 median;
/// - a worker leaves a group once for a run of that group's items (`runGroupItem`): the
///   group's line stays with the producer; 50.0 -> 43.5 best, 54.1 -> 47.1 median;
/// - allocation prefetches the next cached node for writing (ContinuationCache): 49.6 ->
///   44.4 best, 82.4 -> 61.2 median; the producer's CPU time 23.9 -> 18.7 ns median.
/// Measured and left out: a test-and-test-and-set pop lock (best 38.7 -> 34.7, median
/// 48.3 -> 61.4; total CPU no lower); a pause before a worker looks again after losing the
/// pop lock (best 38.8 -> 43.4). Workers: one (GRANDCENTRAL_THREAD_LIMIT=1) is no faster
/// than two on a quiet machine (47.5 vs 47.2 best of 8, load 5) and slower under load
/// (70 vs 43, load 14); the run makes 300-1,500 context switches for 1.1M items, so
/// neither a second worker nor a spinner takes the producer's CPU away often. What is
/// left on the workers' side is the pop lock, taken by two workers in turn (its exchange
/// and `popRootContended` are about a quarter of all samples): the batching that would
/// remove it is the rejected design above. The yardstick is not reachable within the
/// contract: libgomp runs a task at once on the creating thread while many are queued
/// (task throttling; in 2 of 3 runs 0.96-1.05 million of the 1.1 million tasks ran on the
/// creating thread), so OpenMP's 15-25 ns per task is about what GrandCentral's producer
/// alone spends per `dispatch_group_async_f` (15-24 ns of CPU) before any worker runs the
/// item, and `dispatch_async_f` cannot run its function on its caller's thread.
/// bench/run.sh (load 7, then 5): group_async 20.4 -> 22.9 Mitems/s (libdispatch 10.2), against
/// OpenMP 2.19 -> 2.40x its time (OpenMP's best moved 22.9 -> 18.5 ns between the runs).
/// Against 6786f20, the build before the engine's promises (alternating, load 7, best /
/// median of 10, ns per item): this row 55.0 / 67.7 -> 41.6 / 47.6, and 2M async_f onto
/// one serial queue 31.4 / 35.1 -> 26.7 / 28.6. Per item (callgrind, a serial queue whose
/// first item holds the drain until all are submitted): dispatch_async_f 41.0 at 6786f20,
/// 60.0 at aef9d14 (merged with dispatch_async_enforce_qos_class_f, now its caller), 53.8
/// now (the prefetch is 3 of them); the serial drain loop 32.0 against 38.1.
///
/// What a worker runs at: the nice value of the QoS class of the root its item came from
/// (libdispatch's values on Linux: background 10, utility 2, default 0, user-initiated and
/// user-interactive -2; `ThreadPriority` holds the table and the privilege rule). Since a
/// worker serves every root, it sets the value per item, not per thread: before an item it
/// compares the root's value (`niceByRoot`, one load) with the one it has (`Worker.nice`)
/// and calls setpriority only when they differ (`Worker.enterClass`), so a worker that keeps
/// serving one class makes no system call and the hot path pays one compare. It does so
/// only where a thread can come back down to 0 and below (root or CAP_SYS_NICE, or
/// RLIMIT_NICE >= 20, which clamps -2 to 0); an ordinary user's workers stay at the value
/// they started at, because lowering a nice value needs privilege and a worker left at 10
/// would run the next default item at 10 — and every thread it started too, since threads
/// inherit nice values (libdispatch does that unprivileged: its background threads go to 10
/// one way, and default items later ran at 10). Rejected for that case, for now: per-class
/// workers for the classes below default, or workers that serve only classes at or below
/// their value with threads started by one kept at 0; each changes how the pool wakes,
/// starts and counts workers, for a gain only unprivileged processes see.
///
/// Rejected: starting a thread on every push onto an overcommit root that finds no idle
/// worker (libdispatch's Linux pthread pool). It is the most prompt, but a producer that
/// creates 200,000 short-lived serial queues (each a push onto the overcommit root) then
/// outruns the workers and every push starts a thread: libdispatch reaches its limit of 255
/// threads on that benchmark (queue_cycle) and runs it 6-10× slower than GrandCentral with
/// a handful, the threads convoying on malloc's arena lock. Waiting two monitor ticks for
/// evidence that the overcommit roots are not being served costs a couple of milliseconds
/// of promptness and keeps the pool at 4-6 threads there.
///
/// Counters (all atomics, any thread):
/// - `threads`: live workers; a starter increments before creating, a worker decrements on
///   exit. Relaxed: it is a count for decisions, never a publication of data; the limit is
///   kept by the CAS in `startWorker`, which is a single-variable invariant.
/// - `starting`: workers created that have not yet looked for work; incremented with
///   `threads`, decremented by the worker when it first looks. The monitor adds nothing
///   while a thread is on its way (relaxed: a heuristic, a stale value delays one tick).
/// - `idle`: workers parked or committed to parking. A producer that takes a unit of `idle`
///   (CAS down) owes that worker one `parked.signal()`; a worker that leaves idle on
///   its own (found work on its re-check, or timed out) takes its unit back the same way, and
///   if it cannot (a producer took it) it consumes the signal that is on its way.
///   Sequentially consistent: the worker's increment-then-look-for-work and the producer's
///   push-then-look-at-idle are a Dekker pair.
/// - `blocked`: workers inside a BlockingRegion (relaxed; a count for decisions).
/// - `spinning`: workers in the first phase of `spinForWork`. Joined by CAS below
///   `maxSpinners`, left by a decrement before the yielding phase (or on finding work). Sequentially consistent: the spinner's
///   decrement-then-look (in `park`) and the producer's push-then-look-at-`spinning` are a
///   Dekker pair, so an item whose producer saw a spinner and woke no one is seen by that
///   spinner, either while it spins or in `park`'s look after it announced itself idle.
/// - `yielding`: workers in the second, yielding phase of `spinForWork`; the same Dekker
///   pair with producers, who look at it only while `yieldersTakeWork` is set.
///
/// Debug lines (`GRANDCENTRAL_DEBUG`, `DebugLog`): `startWorker` says which rule started a
/// worker (`WorkerStartReason`) and for which root, or that the limit stopped it; a worker
/// says when it retires and after how long idle. Each is behind `debug`, a stored flag read
/// once at init, tested only where a thread is started or retired, never per item.
final class ThreadPool: @unchecked Sendable {
    static let shared = ThreadPool()

    /// libdispatch's process-wide limit on worker threads (DISPATCH_WORKQ_MAX_PTHREAD_COUNT).
    static let defaultThreadLimit = 255

    let activeCPUs: Int
    let threadLimit: Int
    let idleTimeout: Int64 = 5_000_000_000

    let threads = Atomic<Int>(0)
    let starting = Atomic<Int>(0)
    let idle = Atomic<Int>(0)
    let blocked = Atomic<Int>(0)
    /// Workers spinning for work before they park, in the first phase of
    /// `Worker.spinForWork`. A producer that sees one wakes no one: the spinner takes the
    /// item. Sequentially consistent: the
    /// producer's push-then-look and the spinner's leave-then-look are a Dekker pair.
    let spinning = Atomic<Int>(0)
    /// Workers in the second, yielding phase of `Worker.spinForWork`. Producers wake a
    /// parked worker anyway (a yield may take the worker off its CPU for a slice), except
    /// while `yieldersTakeWork` is set. Sequentially consistent, as `spinning`.
    let yielding = Atomic<Int>(0)
    /// Set by the event thread while it polls after a delivery (EventLoopDescriptors.swift,
    /// `DescriptorPolling`), which it does only while it sees no contention for the CPUs:
    /// then a yielding worker gets its CPU back at once, and a producer that sees one wakes
    /// no one, as it would for a spinner. (Without it, each readiness event on a busy pipe
    /// woke a parked worker that found nothing: 1,926 futex wakes for 2,000 events, the
    /// yielding worker having taken every item.) Relaxed: a stale value only means one
    /// wake more or less; the item is never stranded, by the `yielding` Dekker pair.
    let yieldersTakeWork = Atomic<Bool>(false)
    /// At most this many workers spin at once: half the CPUs, at least one (tokio's limit on
    /// searching workers, Go's on spinning Ms), so spinners never hold every CPU.
    let maxSpinners: Int
    /// How long a worker spins before it parks (ns), and for how much of that it spins on
    /// pause instructions before it yields the CPU between looks.
    let spinBudget: UInt64 = 20_000
    let spinPauseBudget: UInt64 = 5_000
    /// The `scanOrder` index of a root the monitor found left waiting behind higher-QoS
    /// roots (`StarvationMonitor`), or -1: the next worker that looks for work takes one
    /// item from it first, and clears it. Relaxed: a hint; a worker that misses it takes the
    /// highest item, as it would have, and the monitor sets it again two ticks later.
    let favoredRoot = Atomic<Int>(-1)
    /// `DebugLog.enabled`, copied at init: the decision points test this field of the pool
    /// they hold, not a lazy global.
    let debug: Bool
    /// Debug lines only: the limit was reported and no worker has exited since, so the next
    /// start the limit stops is not reported again (the monitor tries every tick). Relaxed:
    /// at worst a line more or less.
    let limitReported = Atomic<Bool>(false)
    /// Where idle workers sleep; wakes the most recently parked first (`ParkedWorkers`).
    let parked = ParkedWorkers()

    /// Live workers, for the monitor. Guarded by `workersLock`.
    private var workers: [Worker] = []
    private let workersLock = SpinLock()
    let monitor = StarvationMonitor()

    /// `RootQueues.scanOrder`, copied here: a worker's loop (`findWork`, `hasWork` while it
    /// spins) reads a stored field of the pool it holds instead of a lazy global, whose
    /// accessor is a `swift_once` — under ThreadSanitizer always the slow path, a
    /// priority-inheritance lock that 255 spinning workers convoyed on.
    let scanOrder: UnsafeMutableBufferPointer<Unmanaged<RootQueue>>
    /// `ThreadPriority.niceByRoot`, copied here for the same reason: the nice value each
    /// root's items run at (`ThreadPriority.unchanged`: leave the worker as it is).
    let niceByRoot: UnsafeMutableBufferPointer<Int32>

    private init() {
        scanOrder = RootQueues.scanOrder
        niceByRoot = ThreadPriority.niceByRoot
        activeCPUs = Int(gc_active_cpu_count())
        maxSpinners = max(1, activeCPUs / 2)
        threadLimit = ThreadPool.limitFromEnvironment()
        debug = DebugLog.enabled
        Fork.install()
    }

    /// The child of a fork (Runtime/Fork.swift): no worker of the parent exists here. Zero
    /// the counts and forget the workers, so the child's first work starts threads of its
    /// own. Single-threaded (the child has one thread); stores only.
    func resetInForkChild() {
        threads.store(0, ordering: .relaxed)
        starting.store(0, ordering: .relaxed)
        idle.store(0, ordering: .relaxed)
        blocked.store(0, ordering: .relaxed)
        spinning.store(0, ordering: .relaxed)
        yielding.store(0, ordering: .relaxed)
        yieldersTakeWork.store(false, ordering: .relaxed)
        limitReported.store(false, ordering: .relaxed)
        parked.resetInForkChild()
        workersLock.resetInForkChild()
        workers = []
        monitor.resetInForkChild()
    }

    /// `GRANDCENTRAL_THREAD_LIMIT` if it is a positive integer, else 255.
    static func limitFromEnvironment() -> Int {
        guard let raw = getenv("GRANDCENTRAL_THREAD_LIMIT"),
              let value = Int(String(cString: raw)), value > 0 else { return defaultThreadLimit }
        return value
    }

    // MARK: Producers

    /// Called when a push made a root queue non-empty (or, with another `reason`, when a
    /// worker saw work that needs a peer).
    @inline(__always)
    func workAvailable(_ reason: WorkerStartReason = .workQueued) {
        // A spinning worker takes the item (see `spinning`).
        if spinning.load(ordering: .sequentiallyConsistent) > 0 { return }
        if yieldersTakeWork.load(ordering: .relaxed) && yielding.load(ordering: .sequentiallyConsistent) > 0 { return }
        var n = idle.load(ordering: .sequentiallyConsistent)
        while n > 0 {
            let (done, now) = idle.weakCompareExchange(expected: n, desired: n - 1, ordering: .sequentiallyConsistent)
            if done {
                parked.signal()
                return
            }
            n = now
        }
        workAvailableNoIdleWorker(reason)
    }

    /// Work is queued and a CPU may be free for it (a worker just took an item and more
    /// remain, or a worker is about to block): bring in a parked worker, a new one if
    /// fewer than `activeCPUs` run, or let the monitor judge.
    @inline(__always)
    func moreWorkQueued(_ reason: WorkerStartReason) {
        if spinning.load(ordering: .sequentiallyConsistent) > 0 { return }  // it takes the item
        if idle.load(ordering: .sequentiallyConsistent) > 0 {
            workAvailable(reason)
        } else if threads.load(ordering: .relaxed) - blocked.load(ordering: .relaxed) < activeCPUs {
            workAvailableNoIdleWorker(reason)
        } else {
            monitor.poke()
        }
    }

    /// Joins the spinners unless `maxSpinners` already spin. Relaxed load, then a
    /// sequentially consistent RMW (the one the producer's look pairs with).
    @inline(__always)
    func beginSpinning() -> Bool {
        var n = spinning.load(ordering: .relaxed)
        while n < maxSpinners {
            let (done, now) = spinning.weakCompareExchange(expected: n, desired: n + 1, ordering: .sequentiallyConsistent)
            if done { return true }
            n = now
        }
        return false
    }

    @inline(never)
    func workAvailableNoIdleWorker(_ reason: WorkerStartReason) {
        let running = threads.load(ordering: .relaxed) - blocked.load(ordering: .relaxed)
        if running < activeCPUs && startWorker(reason) { return }
        monitor.poke()
    }

    /// Starts one worker unless at the limit. Returns whether it did. `reason` is for the
    /// debug line.
    @discardableResult
    func startWorker(_ reason: WorkerStartReason) -> Bool {
        var n = threads.load(ordering: .relaxed)
        while true {
            if n >= threadLimit {
                if debug { logLimitReached(reason) }
                return false
            }
            let (done, now) = threads.weakCompareExchange(expected: n, desired: n + 1, ordering: .relaxed)
            if done { break }
            n = now
        }
        // The event thread first: a process that can have one more thread gets timers, and
        // the event thread runs the work while no worker can start (ThreadStartFailures).
        _ = EventLoop.shared.ensureThread()
        starting.wrappingAdd(1, ordering: .relaxed)
        // Debug lines: the root, looked at before the new worker can empty it.
        let root = debug ? waitingRoot(overcommit: reason.overcommit) : nil
        let worker = Worker(pool: self)
        let context = Unmanaged.passRetained(worker).toOpaque()
        let error = gc_thread_create(workerMain, context, ThreadNames.worker)
        if error != 0 {
            Unmanaged<Worker>.fromOpaque(context).release()
            starting.wrappingSubtract(1, ordering: .relaxed)
            threads.wrappingSubtract(1, ordering: .relaxed)
            if debug { DebugLog.pool("could not start a worker: pthread_create: \(String(cString: strerror(error)))") }
            ThreadStartFailures.shared.workerStartFailed(error)
            return false
        }
        if debug { logWorkerStarted(reason, root: root, threads: n + 1) }
        return true
    }

    // MARK: Debug lines (GRANDCENTRAL_DEBUG; cold, called only when `debug` is set)

    @inline(never)
    func logWorkerStarted(_ reason: WorkerStartReason, root: Int?, threads: Int) {
        let blocked = blocked.load(ordering: .relaxed)
        let root = root.map { "root " + DebugLog.rootName(index: $0) } ?? "no root (the work was taken meanwhile)"
        DebugLog.pool("worker started for \(root): \(reason.text) "
            + "(\(DebugLog.count(threads, "worker")), \(blocked) blocked, \(DebugLog.count(activeCPUs, "CPU")), limit \(threadLimit))")
    }

    /// The thread limit stopped a start: said once until a worker exits.
    @inline(never)
    func logLimitReached(_ reason: WorkerStartReason) {
        if limitReported.exchange(true, ordering: .relaxed) { return }
        let root = waitingRoot(overcommit: reason.overcommit).map { "root " + DebugLog.rootName(index: $0) } ?? "a root"
        DebugLog.pool("thread limit reached: \(threadLimit) workers, work on \(root) waits for one to come free "
            + "(wanted one because: \(reason.text))")
    }

    /// Debug lines only: the `RootQueues.all` index of the highest-QoS root with work
    /// waiting, of the given flavour (nil: either), or nil if none has any.
    func waitingRoot(overcommit: Bool?) -> Int? {
        for (i, queue) in scanOrder.enumerated() {
            let (empty, flavour) = queue._withUnsafeGuaranteedRef { ($0.isEmptyRoot, $0.overcommit) }
            if !empty && (overcommit == nil || overcommit == flavour) { return scanOrder.count - 1 - i }
        }
        return nil
    }

    // MARK: Workers

    func register(_ worker: Worker) { workersLock.withLock { workers.append(worker) } }
    func unregister(_ worker: Worker) { workersLock.withLock { workers.removeAll { $0 === worker } } }
    func snapshotWorkers() -> [Worker] { workersLock.withLock { workers } }

    /// Takes the next item, highest QoS first (the root the monitor found left waiting
    /// behind higher ones first of all: `favoredRoot`), and tells `worker` which flavour of
    /// root it came from.
    @inline(__always)
    func findWork(for worker: Worker) -> Continuation? {
        let favored = favoredRoot.load(ordering: .relaxed)
        if favored >= 0, let node = takeFavored(favored, for: worker) { return node }
        for (i, queue) in scanOrder.enumerated() {
            let (node, overcommit) = queue._withUnsafeGuaranteedRef { ($0.popRoot(), $0.overcommit) }
            if let node {
                worker.servingOvercommit.store(overcommit, ordering: .relaxed)
                worker.rootIndex.store(scanOrder.count - 1 - i, ordering: .relaxed)
                worker.lookBehindFrom = i
                return node
            }
        }
        return nil
    }

    /// One item from the favored root (`scanOrder` index `favored`), which then stops
    /// being favored: the monitor favors it again if it is left waiting again.
    @inline(never)
    func takeFavored(_ favored: Int, for worker: Worker) -> Continuation? {
        _ = favoredRoot.compareExchange(expected: favored, desired: -1, ordering: .relaxed)
        let (node, overcommit) = scanOrder[favored]._withUnsafeGuaranteedRef { ($0.popRoot(), $0.overcommit) }
        guard let node else { return nil }
        worker.servingOvercommit.store(overcommit, ordering: .relaxed)
        worker.rootIndex.store(scanOrder.count - 1 - favored, ordering: .relaxed)
        worker.lookBehindFrom = 0  // it passed over higher roots that may have items
        return node
    }

    /// The next item, highest QoS first, for a thread that is not a worker (the event
    /// thread while no worker can be started: ThreadStartFailures).
    func takeWorkWithoutWorker() -> Continuation? {
        for queue in scanOrder {
            if let node = queue._withUnsafeGuaranteedRef({ $0.popRoot() }) { return node }
        }
        return nil
    }

    @inline(__always)
    func hasWork() -> Bool {
        for queue in scanOrder where !queue._withUnsafeGuaranteedRef({ $0.isEmptyRoot }) { return true }
        return false
    }

    /// Whether the root at `scanOrder` index `first`, or one below it, has an item.
    @inline(__always)
    func hasWork(fromScanIndex first: Int) -> Bool {
        var i = first
        while i < scanOrder.count {
            if !scanOrder[i]._withUnsafeGuaranteedRef({ $0.isEmptyRoot }) { return true }
            i += 1
        }
        return false
    }

    // MARK: Blocking

    static func workerWillBlock(_ raw: UnsafeMutableRawPointer) {
        let pool = ThreadPool.shared
        Unmanaged<Worker>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.inBlockingRegion.store(true, ordering: .relaxed) }
        pool.blocked.wrappingAdd(1, ordering: .relaxed)
        // This worker's CPU is free while it waits: let queued work have it.
        if pool.hasWork() { pool.moreWorkQueued(.workerBlocking) }
    }

    static func workerDidUnblock(_ raw: UnsafeMutableRawPointer) {
        Unmanaged<Worker>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.inBlockingRegion.store(false, ordering: .relaxed) }
        ThreadPool.shared.blocked.wrappingSubtract(1, ordering: .relaxed)
    }
}

/// One pool thread.
///
/// Written by the worker, read by the monitor (relaxed: the monitor samples them and
/// compares with its previous sample; a stale value only delays a decision by a tick):
/// `busy`, `servingOvercommit`, `inBlockingRegion`, `itemsRun`, `tid`, `cpuClock`. `tid` and `cpuClock` are
/// stored before the worker registers, so the monitor (which finds workers through the
/// registry's lock) sees them set.
/// `rootIndex` (the root of the current or last item, index into `RootQueues.all`) and
/// `runningQueue` (the queue being drained, or whose item runs; 0 if none) too, but stored
/// releasing and loaded acquiring (ThreadNames).
/// The monitor's alone: `itemsSeenByMonitor`, `cpuSeenByMonitor`, `cpuSampledAtByMonitor`,
/// `stalledSamplesByMonitor`, `nappingSamplesByMonitor`, `itemsSeenByNamer`, `itemSeenSince`.
/// `name`, under `nameLock`: the name the library last gave the thread; the lock is taken by
/// the worker when it parks and by the monitor when it renames the worker (ThreadNames).
final class Worker: @unchecked Sendable {
    let pool: ThreadPool  // immortal; a strong let costs no reference counting to read
    let busy = Atomic<Bool>(false)
    let servingOvercommit = Atomic<Bool>(false)
    /// Inside a BlockingRegion (the library's own waits).
    let inBlockingRegion = Atomic<Bool>(false)
    let itemsRun = Atomic<UInt64>(0)
    let tid = Atomic<Int32>(0)
    /// The thread's CPU-time clock (pthread_getcpuclockid), for the monitor.
    let cpuClock = Atomic<Int32>(0)
    var itemsSeenByMonitor: UInt64 = .max
    var cpuSeenByMonitor: Int64 = -1
    /// When the monitor read `cpuSeenByMonitor` (uptime, ns).
    var cpuSampledAtByMonitor: Int64 = 0
    var stalledSamplesByMonitor = 0
    var nappingSamplesByMonitor = 0
    let rootIndex = Atomic<Int>(0)
    let runningQueue = Atomic<UInt>(0)
    /// Our own spin lock, not `Mutex`: the toolchain's Synchronization module is not built
    /// for ThreadSanitizer, which then cannot see a Mutex order anything.
    let nameLock = SpinLock()
    var name = WorkerName.initial
    var itemsSeenByNamer: UInt64 = .max
    var itemSeenSince: Int64 = 0
    /// Debug lines only (`pool.debug`): when this worker last parked. The worker's alone.
    var idleSince: UInt64 = 0
    /// The `scanOrder` index from which the worker looks for items behind the one it just
    /// took (`findWork` sets it: that item's root, or 0 after a favored root's item). The
    /// worker's alone.
    var lookBehindFrom = 0
    /// The thread's nice value as this worker last set or read it. The worker's alone.
    var nice: Int32 = 0
    /// Leaves of `deferredGroup` owed for items this worker ran (`runGroupItem`); the
    /// group unretained (it holds itself while these are part of its count). The worker's
    /// alone.
    var deferredGroup: UnsafeMutableRawPointer?
    var deferredLeaves: UInt64 = 0
    /// This worker's place in `pool.parked` while it is parked (ParkedWorkers.swift).
    let parkSlot = ParkedWorkers.Slot.allocate()
    init(pool: ThreadPool) { self.pool = pool }
    deinit { parkSlot.deallocate() }

    /// Going idle: take the idle name of the last item's root, unless already named so.
    func nameIdle() {
        let bucket = rootIndex.load(ordering: .relaxed) / 2
        nameLock.withLock {
            if name == .idle(bucket: bucket) { return }
            name = .idle(bucket: bucket)
            _ = gc_thread_set_name(tid.load(ordering: .relaxed), ThreadNames.idleName(bucket: bucket))
        }
    }

    func run() {
        tid.store(gc_thread_id(), ordering: .relaxed)
        var clock = clockid_t()
        if pthread_getcpuclockid(pthread_self(), &clock) == 0 { cpuClock.store(clock, ordering: .relaxed) }
        pool.register(self)
        let thread = gc_thread_self()!
        thread.pointee.worker = Unmanaged.passUnretained(self).toOpaque()
        // Workers fill their caches by recycling before they ever allocate: make sure the
        // cache is freed when this thread exits after its idle timeout.
        gc_thread_register_cache_cleanup()
        nice = gc_thread_nice()
        var first = true
        /// Parked (or new) until this item: tell the monitor, which may be asleep.
        var woke = true
        /// The watched-signal generation this thread's mask reflects (0: the mask every
        /// library thread starts with, nothing unblocked).
        var signalGeneration: UInt32 = 0
        /// Looks in a row that found work there but did not get it (see below).
        var missedLooks = 0
        while true {
            let found = pool.findWork(for: self)
            if first {
                first = false
                pool.starting.wrappingSubtract(1, ordering: .relaxed)
            }
            if let node = found {
                missedLooks = 0
                busy.store(true, ordering: .relaxed)
                if woke {
                    woke = false
                    pool.monitor.workerWoke()
                }
                // More queued behind this one: make sure a peer comes for it (producers
                // only wake a worker on a root queue's empty → non-empty transition). Only
                // this root and those below it: a root above was empty when `findWork`
                // passed it (or its pop lock was held, and the holder looks behind its own
                // item), and a push that has made one non-empty since woke a worker, or saw
                // a spinner that is not this worker (this one left the spinners before it
                // looked).
                if pool.hasWork(fromScanIndex: lookBehindFrom) {
                    pool.moreWorkQueued(.moreWorkBehind)
                }
                // Signals a source watches are unblocked on workers (signal.c).
                if gc_signal_generation_now() != signalGeneration {
                    signalGeneration = gc_signal_update_worker_mask()
                }
                enterClass(ofRoot: rootIndex.load(ordering: .relaxed))
                if node.pointee.flags == ContinuationFlags.groupMember.rawValue {
                    runGroupItem(node)
                } else {
                    if deferredLeaves != 0 { flushGroupLeaves() }
                    runContinuation(node)
                }
                // Only this thread writes it; the monitor reads it.
                itemsRun.store(itemsRun.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
                continue
            }
            if deferredLeaves != 0 { flushGroupLeaves() }
            busy.store(false, ordering: .relaxed)
            // Work there that `findWork` did not get (another worker held a root's pop
            // lock): look again at once, without joining the spinners (two read-modify-writes
            // on a line every spinner and producer reads). Every 64th miss in a row yields
            // the CPU: the holder of the pop lock may be a thread this one keeps off its CPU
            // (under SCHED_FIFO, where nothing preempts a spinning thread for a peer of its
            // priority, two workers looping here while a third held the lock hung a process).
            if pool.hasWork() {
                missedLooks &+= 1
                if missedLooks & 63 == 0 { sched_yield() }
                continue
            }
            if spinForWork() { continue }
            nameIdle()
            if !park() { break }
            woke = true
        }
        thread.pointee.worker = nil
        pool.unregister(self)
        let left = pool.threads.wrappingSubtract(1, ordering: .relaxed).newValue
        if pool.debug {
            pool.limitReported.store(false, ordering: .relaxed)
            let idle = gc_uptime_ns() &- idleSince
            DebugLog.pool("worker \(tid.load(ordering: .relaxed)) retired after \(DebugLog.seconds(idle)) idle "
                + "(\(DebugLog.count(left, "worker")) left)")
        }
        // A producer may have counted on us between our last look and our exit.
        if pool.hasWork() { pool.workAvailable(.retiringWorkerSawWork) }
    }

    /// A plain item of a group (`dispatch_group_async` onto a root: no barrier, no width
    /// to give back, nothing else): runs it and leaves its group *later*, with the leaves
    /// of the items of the same group this worker runs right after it, in one atomic step
    /// (`flushGroupLeaves`), before the worker runs anything else or looks for work in vain.
    /// Nothing can tell: a group's count reaches zero, which is all a waiter or a
    /// notification sees, only when no member runs — and while this worker runs the next
    /// item of the group, that item is a member. The leaves are applied before the
    /// worker runs an item that is not this group's (which may wait for the group), before
    /// it spins or parks, and so before it exits. The group holds itself while its count is
    /// non-zero, and the deferred leaves are part of that count: `deferredGroup` stays
    /// valid unretained. Why: in the fan-out row (1M `dispatch_group_async_f` from one
    /// thread) the group's state word took a cache-line transfer per item between the
    /// producer's enter and each worker's leave.
    @inline(__always)
    func runGroupItem(_ node: Continuation) {
        let group = node.pointee.group
        let function = node.pointee.function!
        let context = node.pointee.context
        ContinuationCache.recycle(node)
        if group != deferredGroup {
            if deferredLeaves != 0 { flushGroupLeaves() }
            deferredGroup = group
        }
        function(context)
        deferredLeaves &+= 1
    }

    /// Applies the leaves `runGroupItem` deferred.
    @inline(never)
    func flushGroupLeaves() {
        let n = deferredLeaves
        deferredLeaves = 0
        Unmanaged<DispatchGroup>.fromOpaque(deferredGroup!)._withUnsafeGuaranteedRef { $0.leave(times: n) }
    }

    /// Before an item of root `root` (a `RootQueues.all` index) runs: the thread takes the
    /// nice value of the root's QoS class (ThreadPriority), with a system call only when
    /// that differs from the value it has. A failed setpriority leaves `nice` as it was, so
    /// the next item of another class tries again.
    @inline(__always)
    func enterClass(ofRoot root: Int) {
        let wanted = pool.niceByRoot[root]
        if wanted != nice && wanted != ThreadPriority.unchanged { setNice(wanted) }
    }

    @inline(never)
    func setNice(_ wanted: Int32) {
        if gc_thread_set_nice(wanted) == 0 { nice = wanted }
    }

    /// The CPU time this thread has used, in nanoseconds, or -1 if it cannot be read
    /// (the thread has exited). Any thread may call it.
    func cpuTime() -> Int64 {
        var ts = timespec()
        if clock_gettime(clockid_t(cpuClock.load(ordering: .relaxed)), &ts) != 0 { return -1 }
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Spins before parking, while fewer than `pool.maxSpinners` workers spin: a queue that
    /// refills quickly (a producer feeding a serial queue, a Swift task group adding
    /// children, an event the event thread is about to hand over) is picked up without a
    /// futex round trip on either side. For the first `pool.spinPauseBudget` ns the worker
    /// counts as a spinner (a producer that sees one wakes no one: `workAvailable`) and looks
    /// between pause instructions. Then it leaves the spinners, so producers wake parked
    /// workers again, and looks between `sched_yield`s until `pool.spinBudget` ns have
    /// passed: a runnable thread on this CPU (the producer, another process) runs instead,
    /// and a worker that the yield took off its CPU on a loaded machine is not what a
    /// producer waits for. Returns whether work is there; on false the caller parks, and
    /// `park` looks once more after announcing itself idle.
    @inline(__always)
    func spinForWork() -> Bool {
        if !pool.beginSpinning() { return false }
        let start = gc_uptime_ns()
        let found = spinUntilWork(start: start, budget: pool.spinPauseBudget, yielding: false)
        // Sequentially consistent: leaving the spinners, then looking again (below, or in
        // `park` after announcing idle), against a producer's push then its look at
        // `spinning` (Dekker): a producer that saw this worker spinning and woke no one has
        // its item seen by this worker.
        pool.spinning.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        if found { return true }
        pool.yielding.wrappingAdd(1, ordering: .sequentiallyConsistent)
        let foundYielding = spinUntilWork(start: start, budget: pool.spinBudget, yielding: true)
        // Leaving, then looking (the caller's `findWork`, or `park`'s look after it
        // announced itself idle): the Dekker pair of `yielding`, as of `spinning` above.
        pool.yielding.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        return foundYielding
    }

    /// Looks for work until `budget` ns after `start`, every eighth look checking the clock
    /// and, when `yielding`, yielding the CPU; pause instructions between the other looks.
    @inline(never)
    func spinUntilWork(start: UInt64, budget: UInt64, yielding: Bool) -> Bool {
        var looks = 0
        while true {
            if pool.hasWork() { return true }
            looks &+= 1
            if looks & 7 != 0 {
                gc_cpu_relax()
                continue
            }
            if gc_uptime_ns() &- start >= budget { return false }
            if yielding { sched_yield() } else { gc_cpu_relax() }
        }
    }

    /// Parks until woken. Returns false when the worker should exit (idle timeout).
    func park() -> Bool {
        if pool.debug { idleSince = gc_uptime_ns() }
        pool.idle.wrappingAdd(1, ordering: .sequentiallyConsistent)
        // Re-check after announcing ourselves idle: a producer that pushed before our
        // increment did not see us, so we must see its item (Dekker with workAvailable).
        if pool.hasWork() {
            if leaveIdle() { return true }
            _ = pool.parked.wait(parkSlot, timeoutNanoseconds: -1)  // a producer took our unit
            return true
        }
        if pool.parked.wait(parkSlot, timeoutNanoseconds: pool.idleTimeout) { return true }
        // Timed out: exit, unless a producer took our unit meanwhile (then its signal is
        // coming, and it expects a worker).
        if leaveIdle() { return false }
        _ = pool.parked.wait(parkSlot, timeoutNanoseconds: -1)
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
