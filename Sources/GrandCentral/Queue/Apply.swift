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
/// the pool has not started. Each helper item names the one apply it was pushed for (a
/// ticket: the state's index and the apply's generation, in the item's context word); an
/// apply's state is open while its caller works, and a helper joins only if the state is
/// open *for its ticket's generation* (`enter`). The caller closes the state when the
/// iterations are done, waits only for the helpers inside to leave, and puts it back on the
/// free list. A helper that starts later finds the state closed, or open for a later apply,
/// and does nothing: it must not join a later apply, even on the same queue, because on a
/// custom concurrent queue it was ordered before that apply (a barrier, or a suspension,
/// submitted in between would be overtaken). So a state must outlive every helper item that
/// names it: states are immortal, in a table by index, recycled through the free list, and an
/// apply makes no heap allocation once the process has made as many states as it ever has
/// applies open at once.
///
/// Who touches what: the fields set in `take` (and `generation`) are written only by the
/// caller that took the state from the free list, before it opens the state (a release
/// store); a helper reads them only after it entered (an acquiring compare-exchange on the
/// open state), and the caller does not reuse the state until every helper that entered has
/// left. `next`, `done`, `finished`, `entry` are shared atomics. The table's slots are written
/// once, under the registry's lock, before the state is first used; a helper reads its slot
/// after the queue handed it the item the caller pushed later.
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
    /// Which apply the state holds: one more at each `take` (48 bits in a ticket: it does
    /// not wrap while a helper waits).
    private(set) var generation: UInt = 0
    /// The state's slot in the registry's table.
    let index: Int
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    /// Futex word: becomes 1 when `done == iterations`.
    let finished: UnsafeMutablePointer<UInt32>
    /// Futex word: bit 0 is set while the state is open (from `take` until the caller's
    /// `close`); the bits above count the helpers inside (2 each). The caller sleeps on it
    /// after closing until it is 0; the last helper to leave a closed state wakes it.
    let entry: UnsafeMutablePointer<UInt32>
    /// The free list's link; guarded by the registry's lock.
    fileprivate var nextFree: ApplyState?

    fileprivate init(index: Int) {
        self.index = index
        finished = .allocate(capacity: 1)
        finished.initialize(to: 0)
        entry = .allocate(capacity: 1)
        entry.initialize(to: 0)
    }

    /// An open state for one apply, and the ticket its helpers carry.
    static func take(work: @escaping @convention(c) (UnsafeMutableRawPointer?, Int) -> Void,
                     rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?,
                     context: UnsafeMutableRawPointer?, iterations: Int, chunk: Int)
        -> (state: ApplyState, ticket: UnsafeMutableRawPointer) {
        let state = ApplyStates.shared.take()
        state.work = work
        state.rangeWork = rangeWork
        state.context = context
        state.iterations = iterations
        state.chunk = chunk
        // Never 0, so no ticket is a null pointer.
        state.generation = max(1, (state.generation &+ 1) & ApplyStates.generationMask)
        state.next.store(0, ordering: .relaxed)
        state.done.store(0, ordering: .relaxed)
        gc_word_store(state.finished, 0)
        gc_word_store(state.entry, 1)  // open; publishes the fields above
        return (state, ApplyStates.ticket(index: state.index, generation: state.generation))
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
        ApplyStates.shared.recycle(self)
    }

    /// A helper: joins the state if it is open for the apply of `generation`.
    func enter(generation ticketGeneration: UInt) -> Bool {
        var now = gc_word_load(entry)
        while now & 1 != 0 {
            if gc_word_cas(entry, now, now &+ 2) {
                if generation == ticketGeneration { return true }
                leave()  // open, but for a later apply
                return false
            }
            now = gc_word_load(entry)
        }
        return false
    }

    /// A helper that entered: leaves; the last to leave a closed state wakes its caller.
    func leave() {
        if gc_word_add(entry, UInt32.max &- 1) == 2 { gc_futex_wake(entry, 1) }
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

/// Every apply state the process has made (immortal, by index) and the free list of those
/// not in use, under one lock. The table is two levels of fixed size: `chunkCount` chunks
/// of `chunkSize` slots, a chunk allocated when its first state is made; so a slot never
/// moves and a helper reads it without the lock.
final class ApplyStates: @unchecked Sendable {
    static let shared = ApplyStates()

    static let chunkSize = 256
    static let chunkCount = 256
    /// A ticket is `index | generation << indexBits`.
    static let indexBits = 16
    static let generationMask: UInt = (1 << (UInt.bitWidth - indexBits)) - 1

    private let lock = SpinLock()
    private var freeHead: ApplyState?
    private var count = 0
    private let chunks: UnsafeMutablePointer<UnsafeMutablePointer<Unmanaged<ApplyState>>?>

    private init() {
        chunks = .allocate(capacity: Self.chunkCount)
        chunks.initialize(repeating: nil, count: Self.chunkCount)
    }

    static func ticket(index: Int, generation: UInt) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(bitPattern: UInt(index) | generation << indexBits)!
    }

    /// The state and generation a helper's ticket names.
    func state(forTicket ticket: UnsafeMutableRawPointer) -> (ApplyState, UInt) {
        let bits = UInt(bitPattern: ticket)
        let index = Int(bits & ((1 << Self.indexBits) - 1))
        let slot = chunks[index / Self.chunkSize]! + index % Self.chunkSize
        return (slot.pointee.takeUnretainedValue(), bits >> Self.indexBits)
    }

    /// A free state, or a new one in the next slot.
    func take() -> ApplyState {
        lock.withLock {
            if let state = freeHead {
                freeHead = state.nextFree
                state.nextFree = nil
                return state
            }
            let index = count
            guard index < Self.chunkSize * Self.chunkCount else {
                fatalError("GrandCentral: more than 65,536 dispatch_apply calls in progress at once")
            }
            count += 1
            if index % Self.chunkSize == 0 {
                let chunk = gc_alloc(MemoryLayout<Unmanaged<ApplyState>>.stride * Self.chunkSize, GC_ALLOC_APPLY_STATE)!
                    .bindMemory(to: Unmanaged<ApplyState>.self, capacity: Self.chunkSize)
                chunks[index / Self.chunkSize] = chunk
            }
            let state = ApplyState(index: index)
            // Immortal: a helper item may name it long after its apply returned.
            (chunks[index / Self.chunkSize]! + index % Self.chunkSize).initialize(to: Unmanaged.passRetained(state))
            return state
        }
    }

    func recycle(_ state: ApplyState) {
        lock.withLock {
            state.nextFree = freeHead
            freeHead = state
        }
    }
}

private let applyParticipant: DispatchFunction = { context in
    Unmanaged<ApplyState>.fromOpaque(context!).takeUnretainedValue().participate()
}

/// A helper item: its context is a ticket for one apply. It helps if that apply is still
/// open; otherwise it has nothing to do.
private let applyHelper: DispatchFunction = { ticket in
    let (state, generation) = ApplyStates.shared.state(forTicket: ticket!)
    guard state.enter(generation: generation) else { return }
    state.participate()
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
        let (state, ticket) = ApplyState.take(work: work, rangeWork: rangeWork, context: context,
                                              iterations: iterations, chunk: chunk)
        for _ in 0..<helpers {
            enqueue(applyHelper, ticket)
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
