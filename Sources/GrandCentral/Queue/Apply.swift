import CGrandCentral
import Synchronization

/// `dispatch_apply_f`: runs `work(context, i)` for every i in 0..<iterations and returns
/// when all have run.
///
/// The caller works too. On a concurrent or root queue, it pushes up to `helpers` helper
/// items (one fewer than the CPUs), then everyone claims chunks of indices from one atomic
/// counter until none are left. The shared state is heap-allocated and reference counted:
/// a helper the pool starts late finds nothing to claim and only drops its reference, so
/// the caller waits for the iterations, never for idle helpers. On a serial queue, or
/// nested inside another apply, the iterations run in order on the caller (as a sync onto
/// the queue), which is what libdispatch does for serial queues and what keeps nested
/// applies from flooding the pool.
final class ApplyState: @unchecked Sendable {
    let work: @convention(c) (UnsafeMutableRawPointer?, Int) -> Void
    /// When set, called once per claimed chunk (start, end) instead of `work` per index:
    /// the Swift API's trampoline loads its closure once per chunk, not once per
    /// iteration (each load retains the closure's context, an atomic on one cache line
    /// that every participant would fight over).
    let rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?
    let context: UnsafeMutableRawPointer?
    let iterations: Int
    let chunk: Int
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    /// Futex word: becomes 1 when `done == iterations`.
    let finished: UnsafeMutablePointer<UInt32>

    init(work: @escaping @convention(c) (UnsafeMutableRawPointer?, Int) -> Void,
         rangeWork: (@convention(c) (UnsafeMutableRawPointer?, Int, Int) -> Void)?,
         context: UnsafeMutableRawPointer?, iterations: Int, chunk: Int) {
        self.work = work
        self.rangeWork = rangeWork
        self.context = context
        self.iterations = iterations
        self.chunk = chunk
        finished = .allocate(capacity: 1)
        finished.initialize(to: 0)
    }

    deinit { finished.deallocate() }

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

private let applyHelper: DispatchFunction = { context in
    let state = Unmanaged<ApplyState>.fromOpaque(context!).takeRetainedValue()
    state.participate()
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
        let state = ApplyState(work: work, rangeWork: rangeWork, context: context, iterations: iterations, chunk: chunk)
        for _ in 1..<width {
            enqueue(applyHelper, Unmanaged.passRetained(state).toOpaque())
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
