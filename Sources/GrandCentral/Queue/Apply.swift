import CGrandCentral
import Synchronization

/// `dispatch_apply_f`: runs `work(context, i)` for every i in 0..<iterations and returns
/// when all have run.
///
/// The caller works too. On a concurrent or root queue, it pushes up to `helpers` helper
/// items (one fewer than the CPUs), then everyone claims chunks of indices from one atomic
/// counter until none are left. On a serial queue, or nested inside another apply, the
/// iterations run in order on the caller (as a sync onto the queue), which is what
/// libdispatch does for serial queues and what keeps nested applies from flooding the pool.
///
/// The caller waits for the iterations and for the helpers inside them, never for helpers
/// the pool has not started: an apply's state is open while its caller works, and a helper
/// joins only an open state (`enter`); the caller closes it when the iterations are done,
/// waits for the helpers inside to leave, and puts it back on the free list. A helper that
/// starts later finds the state closed, or open for a later apply, and joins that one only
/// if it is an apply on the same queue the helper was pushed to: it then holds what any
/// helper of that apply holds (a unit of the queue's width, the queue's identity), so it is
/// a legitimate extra participant. So the state must outlive every helper item that names
/// it: states are immortal, recycled through the free list (`take`/`close`), and an apply
/// makes no heap allocation once the process has made as many states as it ever has applies
/// open at once.
///
/// Who touches what: the fields set in `take` are written only by the caller that took
/// the state from the free list, before it opens the state (a release store); a helper reads
/// them only after it entered (an acquiring compare-exchange on the open state), and the
/// caller does not reuse the state until every helper that entered has left. `next`, `done`,
/// `finished`, `entry` are shared atomics.
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
    /// The queue the apply's helpers are pushed to (unretained; compared, never followed:
    /// the caller keeps the queue alive while the state is open).
    private(set) var queue: UInt = 0
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    /// Futex word: becomes 1 when `done == iterations`.
    let finished: UnsafeMutablePointer<UInt32>
    /// Futex word: bit 0 is set while the state is open (from `take` until the caller's
    /// `close`); the bits above count the helpers inside (2 each). The caller sleeps on it
    /// after closing until it is 0; the last helper to leave a closed state wakes it.
    let entry: UnsafeMutablePointer<UInt32>
    /// The free list's link; guarded by the free list's lock.
    private var nextFree: ApplyState?

    private init() {
        finished = .allocate(capacity: 1)
        finished.initialize(to: 0)
        entry = .allocate(capacity: 1)
        entry.initialize(to: 0)
    }

    // MARK: The free list

    private static let freeList = ApplyFreeList()

    /// An open state for one apply on `queue`.
    static func take(work: @escaping @convention(c) (UnsafeMutableRawPointer?, Int) -> Void,
                     rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?,
                     context: UnsafeMutableRawPointer?, iterations: Int, chunk: Int,
                     queue: DispatchQueue) -> ApplyState {
        let state: ApplyState
        if let recycled = freeList.pop() {
            state = recycled
        } else {
            // Immortal: a helper item may name it long after its apply returned.
            state = Unmanaged.passRetained(ApplyState()).takeUnretainedValue()
        }
        state.work = work
        state.rangeWork = rangeWork
        state.context = context
        state.iterations = iterations
        state.chunk = chunk
        state.queue = UInt(bitPattern: Unmanaged.passUnretained(queue).toOpaque())
        state.next.store(0, ordering: .relaxed)
        state.done.store(0, ordering: .relaxed)
        gc_word_store(state.finished, 0)
        gc_word_store(state.entry, 1)  // open; publishes the fields above
        return state
    }

    /// The caller, when the iterations are done: closes the state, waits for the helpers
    /// inside to leave (they have nothing left to claim), and recycles it.
    func close() {
        var now = gc_word_add(entry, UInt32.max) &- 1  // clear the open bit
        var spins = 0
        while now != 0 {
            if spins < 1024 {
                gc_cpu_relax()
                spins += 1
            } else {
                _ = gc_futex_wait(entry, now, -1)
            }
            now = gc_word_load(entry)
        }
        context = nil
        Self.freeList.push(self)
    }

    /// A helper: joins the state if it is open; false if it is closed.
    func enter() -> Bool {
        var now = gc_word_load(entry)
        while now & 1 != 0 {
            if gc_word_cas(entry, now, now &+ 2) { return true }
            now = gc_word_load(entry)
        }
        return false
    }

    /// A helper that entered: leaves; the last to leave a closed state wakes its caller.
    func leave() {
        if gc_word_add(entry, UInt32.max &- 1) == 2 { gc_futex_wake(entry, 1) }
    }

    /// The head of the free list, under a lock.
    final class ApplyFreeList: @unchecked Sendable {
        private let lock = SpinLock()
        private var head: ApplyState?

        func pop() -> ApplyState? {
            lock.withLock {
                guard let state = head else { return nil }
                head = state.nextFree
                state.nextFree = nil
                return state
            }
        }

        func push(_ state: ApplyState) {
            lock.withLock {
                state.nextFree = head
                head = state
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

    /// The queue a helper item runs on: the queue it is an item of (a concurrent queue's
    /// item runs inside that queue's frame), or else the root the pool took it from.
    static func helperQueue() -> UInt {
        if let top = gc_held_top() { return UInt(bitPattern: top.pointee.queue) & ~1 }
        guard let raw = gc_thread_self().pointee.worker else { return 0 }
        let index = Unmanaged<Worker>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.rootIndex.load(ordering: .relaxed) }
        return UInt(bitPattern: Unmanaged.passUnretained(RootQueues.all[index]).toOpaque())
    }
}

private let applyParticipant: DispatchFunction = { context in
    Unmanaged<ApplyState>.fromOpaque(context!).takeUnretainedValue().participate()
}

/// A helper item: its context is an (immortal) state. It joins the apply the state holds
/// now if that is open and on the helper's own queue; otherwise it has nothing to do.
private let applyHelper: DispatchFunction = { context in
    let state = Unmanaged<ApplyState>.fromOpaque(context!).takeUnretainedValue()
    guard state.enter() else { return }
    if state.queue == ApplyState.helperQueue() { state.participate() }
    state.leave()
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
                                    iterations: iterations, chunk: chunk, queue: self)
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
        state.close()
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
