import CGrandCentral
import Synchronization

/// `dispatch_apply_f`: runs `work(context, i)` for every i in 0..<iterations and returns
/// when all have run.
///
/// The caller works too. On a concurrent or root queue, it pushes up to `helpers` helper
/// items (one fewer than the CPUs), then everyone claims chunks of indices from one atomic
/// counter until none are left. The shared state is counted by hand (`holders`): a helper
/// the pool starts late finds nothing to claim and only drops its hold, so the caller
/// waits for the iterations, never for idle helpers. On a serial queue, or nested inside
/// another apply, the iterations run in order on the caller (as a sync onto the queue),
/// which is what libdispatch does for serial queues and what keeps nested applies from
/// flooding the pool.
///
/// States are recycled, not freed: whoever drops the last hold puts the state on a free
/// list (`ApplyState.take`/`drop`), so an apply makes no heap allocation once the process
/// has made as many states as it ever has applies in flight (late helpers included).
///
/// Who touches what: the fields set in `reset` are written only by the caller that took
/// the state from the free list, before it pushes any helper (the push publishes them);
/// participants read them. `next`, `done`, `finished` are shared atomics. After a holder
/// drops its hold it touches nothing; the last drop's acquire-release on `holders`, then the
/// free list's lock, order every participant's accesses before the next `reset`.
final class ApplyState: @unchecked Sendable {
    private(set) var work: @convention(c) (UnsafeMutableRawPointer?, Int) -> Void = { _, _ in }
    /// When set, called once per claimed chunk (start, end) instead of `work` per index:
    /// the Swift API's trampoline loads its closure once per chunk, not once per
    /// iteration (each load retains the closure's context, an atomic on one cache line
    /// that every participant would fight over).
    private(set) var rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?
    private(set) var context: UnsafeMutableRawPointer?
    private(set) var iterations = 0
    private(set) var chunk = 1
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    /// The caller and each helper pushed hold one; the last to drop recycles the state.
    let holders = Atomic<Int>(0)
    /// Futex word: becomes 1 when `done == iterations`.
    let finished: UnsafeMutablePointer<UInt32>
    /// The free list's link; guarded by `freeLock`.
    private var nextFree: ApplyState?

    private init() {
        finished = .allocate(capacity: 1)
        finished.initialize(to: 0)
    }

    deinit { finished.deallocate() }

    // MARK: The free list

    private static let freeLock = ApplyFreeList()
    /// More than this many idle states are left to ARC (a burst of nested-free applies).
    private static let keep = 64

    /// A state for one apply, with `holders` holds (the caller's and one per helper).
    static func take(work: @escaping @convention(c) (UnsafeMutableRawPointer?, Int) -> Void,
                     rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?,
                     context: UnsafeMutableRawPointer?, iterations: Int, chunk: Int,
                     holders: Int) -> ApplyState {
        let state = freeLock.pop() ?? ApplyState()
        state.work = work
        state.rangeWork = rangeWork
        state.context = context
        state.iterations = iterations
        state.chunk = chunk
        state.next.store(0, ordering: .relaxed)
        state.done.store(0, ordering: .relaxed)
        gc_word_store(state.finished, 0)
        state.holders.store(holders, ordering: .relaxed)
        // The holds keep the state alive together: one ARC retain for all of them, given
        // back by the last drop (after the free list, if it has room, took its own).
        _ = Unmanaged.passUnretained(state).retain()
        return state
    }

    /// Drops one hold; the last puts the state back on the free list.
    func drop() {
        guard holders.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        context = nil
        Self.freeLock.push(self, keep: Self.keep)
        Unmanaged.passUnretained(self).release()
    }

    /// The head of the free list and its length, under one lock.
    final class ApplyFreeList: @unchecked Sendable {
        private let lock = SpinLock()
        private var head: ApplyState?
        private var count = 0

        func pop() -> ApplyState? {
            lock.withLock {
                guard let state = head else { return nil }
                head = state.nextFree
                state.nextFree = nil
                count -= 1
                return state
            }
        }

        func push(_ state: ApplyState, keep: Int) {
            lock.withLock {
                guard count < keep else { return }
                state.nextFree = head
                head = state
                count += 1
            }
        }
    }

    // MARK: Working

    /// Claims and runs chunks until none are left.
    func participate() {
        let thread = gc_thread_self()!
        let outer = thread.pointee.apply
        thread.pointee.apply = Unmanaged.passUnretained(self).toOpaque()
        while true {
            let start = next.wrappingAdd(chunk, ordering: .relaxed).oldValue
            if start >= iterations { break }
            let end = min(start + chunk, iterations)
            if let rangeWork {
                rangeWork(context, start, end)
            } else {
                var i = start
                while i < end {
                    work(context, i)
                    i += 1
                }
            }
            let total = done.wrappingAdd(end - start, ordering: .acquiringAndReleasing).newValue
            if total == iterations {
                gc_word_store(finished, 1)
                gc_futex_wake(finished, 1)
            }
        }
        thread.pointee.apply = outer
    }
}

private let applyParticipant: DispatchFunction = { context in
    Unmanaged<ApplyState>.fromOpaque(context!).takeUnretainedValue().participate()
}

/// A helper item: its context is the state, kept alive by the hold it was pushed with,
/// which it drops when it has nothing left to claim.
private let applyHelper: DispatchFunction = { context in
    let state = Unmanaged<ApplyState>.fromOpaque(context!).takeUnretainedValue()
    state.participate()
    state.drop()
}

extension DispatchQueue {
    final func apply(iterations: Int, context: UnsafeMutableRawPointer?,
                     work: @escaping @convention(c) (UnsafeMutableRawPointer?, Int) -> Void,
                     rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)? = nil) {
        if iterations <= 0 { return }
        let nested = gc_thread_self().pointee.apply != nil
        let cpus = ThreadPool.shared.activeCPUs
        let parallel = !nested && iterations > 1 && cpus > 1 && (role == .root || (usesWidth.load(ordering: .relaxed) && !isSerial))
        if !parallel {
            if role == .root || nested {
                if let rangeWork { return rangeWork(context, 0, iterations) }
                for i in 0..<iterations { work(context, i) }
                return
            }
            var box = SerialApply(work: work, context: context, iterations: iterations)
            withUnsafeMutablePointer(to: &box) { sync(serialApplyTrampoline, UnsafeMutableRawPointer($0), barrier: false, caller: "dispatch_apply") }
            return
        }
        let width = min(cpus, iterations, Int(self.width.load(ordering: .relaxed)))
        // Chunks small enough to balance (about 16 per participant), never empty.
        let chunk = max(1, iterations / (width * 16))
        // Helpers: one fewer than the width. (Bounding them by the helpers of earlier
        // applies still waiting unstarted on the root made an apply whose iterations wait
        // for each other hang when an earlier apply's helper was late: not done.)
        let helpers = width - 1
        let state = ApplyState.take(work: work, rangeWork: rangeWork, context: context,
                                    iterations: iterations, chunk: chunk, holders: 1 + helpers)
        for _ in 0..<helpers {
            enqueue(applyHelper, Unmanaged.passUnretained(state).toOpaque())
        }
        if role == .root || HeldQueues.contains(where: { held, _ in held === self }) {
            // A root queue has no width to take; a caller already inside this queue holds
            // a unit of its width (or its drain), which covers its share. Taking another
            // could wait forever for units held by callers like it.
            HeldQueues.entering(self, exclusive: false) { state.participate() }
        } else {
            // The caller's share is an item of the queue too: it takes a unit of width (or
            // waits behind a barrier, or for a suspended queue to resume) like the helpers.
            sync(applyParticipant, Unmanaged.passUnretained(state).toOpaque(), barrier: false, caller: "dispatch_apply")
        }
        // The rest is at most a chunk per helper, already running: spin briefly before
        // sleeping (a futex sleep and wake cost more than a chunk of short iterations).
        var spins = 0
        while gc_word_load(state.finished) == 0 && spins < 4096 {
            gc_cpu_relax()
            spins += 1
        }
        if gc_word_load(state.finished) == 0 {
            BlockingRegion.enter()
            while gc_word_load(state.finished) == 0 { _ = gc_futex_wait(state.finished, 0, -1) }
            BlockingRegion.leave()
        }
        state.drop()
    }
}

struct SerialApply {
    let work: @convention(c) (UnsafeMutableRawPointer?, Int) -> Void
    let context: UnsafeMutableRawPointer?
    let iterations: Int
}

private let serialApplyTrampoline: DispatchFunction = { raw in
    let box = raw!.assumingMemoryBound(to: SerialApply.self).pointee
    for i in 0..<box.iterations { box.work(box.context, i) }
}
