import CGrandCentral
import Synchronization

// Draining: how the thread that owns a queue's drain (ENQUEUED, see QueueState) runs its
// items. A serial queue's items run here one by one. A concurrent queue's drain is a
// dispatcher: it hands each non-barrier item to the target ("redirects" it, holding one
// unit of width until it completes) and runs barriers itself once nothing is in flight.

/// Items a drain runs before it yields its thread back to the target, so one busy queue
/// does not starve others on the same root queue.
let drainBudget = 1024

/// How a drain ended, and so what becomes of the drain lock (ENQUEUED) and the ARC retain
/// the drain owns. Every drain ends through `finishDrain`: the one place the drain lock
/// changes hands.
enum DrainOutcome {
    /// Nothing runnable is left and the lock is given up (`tryUnlockDrain`).
    case unlocked
    /// The budget ran out with items left: the drain keeps the lock and goes to the back
    /// of its target's line.
    case yielded
    /// A concurrent queue's head item waits for width (DRAIN_WAITING is set): the lock and
    /// the retain stay with the waiting drain, and the completion that clears the bit
    /// schedules it again.
    case waitingForWidth
    /// The head item is a `dispatch_sync` caller that needs the queue exclusively: the lock
    /// passes to that caller, who runs its function on its own thread and gives the queue
    /// back (`syncRelease`).
    case handedOff(Continuation)
}

extension DispatchQueue {
    /// Entered through a scheduled drain node; owns ENQUEUED and one ARC retain.
    ///
    /// The per-kind hook: what "is there work, and run it" means is the drain function of
    /// the object's kind (a serial queue runs items in order, a concurrent queue dispatches
    /// them through its width). A new kind of queue-like object adds its own drain here and
    /// ends it through `finishDrain`.
    final func drain() {
        let recorded = ThreadNames.enter(self)  // for the worker's name (ThreadNames)
        let outcome = HeldQueues.entering(self, exclusive: true) {
            usesWidth.load(ordering: .acquiring) ? drainConcurrent() : drainSerial()
        }
        ThreadNames.leave(recorded)
        finishDrain(outcome)
    }

    /// What happens to the drain lock and the drain's retain when a drain stops.
    @inline(__always)
    final func finishDrain(_ outcome: DrainOutcome) {
        switch outcome {
        case .unlocked:
            Unmanaged.passUnretained(self).release()
        case .yielded:
            scheduleDrain(retain: false)
        case .waitingForWidth:
            break
        case .handedOff(let waiter):
            // The sync caller holds a reference to the queue it syncs onto (and through it,
            // to every queue up its target chain), so the drain's retain can go now.
            Unmanaged.passUnretained(self).release()
            SyncWaiter.wake(waiter)
        }
    }

    /// Runs a serial queue's items in order, on this thread.
    final func drainSerial() -> DrainOutcome {
        var budget = drainBudget
        while true {
            while let node = popSerial() {
                // Suspension is checked after the pop, not before: a check before it may read
                // the state from just before a suspend whose caller then pushed this node.
                // The pop acquired that push, so this load sees the suspend. The node waits
                // in `pendingHead` (empty: popSerial just took from it or found it empty).
                if QueueState(state.load(ordering: .relaxed)).isSuspended {
                    pendingHead.store(UInt(bitPattern: node), ordering: .relaxed)
                    break
                }
                if node.pointee.flags & ContinuationFlags.syncHandoff.rawValue != 0 {
                    if node.pointee.flags & ContinuationFlags.barrier.rawValue == 0 {
                        // The caller asked for a unit of width, not the drain lock: this
                        // queue's width was raised (dispatch_queue_set_width, a barrier
                        // this drain ran inline) after the drain started in serial mode.
                        // Nothing is in flight; go on in concurrent mode, which reserves
                        // the unit for the caller and respects it from now on.
                        pendingHead.store(UInt(bitPattern: node), ordering: .relaxed)
                        return drainConcurrent()
                    }
                    return .handedOff(node)
                }
                runContinuation(node)
                budget -= 1
                if budget <= 0 {
                    // Yield, so one busy queue does not starve others on the same target.
                    if !items.isEmpty { return .yielded }
                    budget = drainBudget
                }
            }
            if tryUnlockDrain() { return .unlocked }
        }
    }

    /// The next item of a serial queue: the one a releasing sync caller put back
    /// (`syncRelease` stashes it in `pendingHead` before scheduling this drain), else the
    /// list's head.
    @inline(__always)
    final func popSerial() -> Continuation? {
        let stashed = pendingHead.load(ordering: .acquiring)
        if stashed != 0 {
            pendingHead.store(0, ordering: .relaxed)
            return Continuation(bitPattern: stashed)
        }
        return items.pop()
    }

    /// Dispatches a concurrent queue's items: each non-barrier item goes to the target
    /// holding one unit of width; a barrier runs here once nothing is in flight. A sync
    /// caller waiting for a unit of width is woken with it; one waiting as a barrier is
    /// handed the whole queue.
    final func drainConcurrent() -> DrainOutcome {
        while true {
            while true {
                let stashed = pendingHead.load(ordering: .acquiring)
                let node: Continuation
                if stashed != 0 {
                    node = Continuation(bitPattern: stashed)!
                } else if let popped = items.pop() {
                    node = popped
                    pendingHead.store(UInt(bitPattern: node), ordering: .relaxed)
                } else {
                    break
                }
                // Suspension is checked after the pop, as in drainSerial. The node stays in
                // `pendingHead` until the resume.
                if QueueState(state.load(ordering: .relaxed)).isSuspended { break }
                let flags = node.pointee.flags
                let isBarrier = flags & ContinuationFlags.barrier.rawValue != 0
                if !reserveWidth(barrier: isBarrier) {
                    // DRAIN_WAITING is set; `pendingHead` keeps the node.
                    return .waitingForWidth
                }
                pendingHead.store(0, ordering: .relaxed)
                if flags & ContinuationFlags.syncHandoff.rawValue != 0 {
                    if isBarrier { return .handedOff(node) }
                    // The caller now holds the unit of width reserved for it, and gives it
                    // back with releaseWidth.
                    SyncWaiter.wake(node)
                } else if isBarrier {
                    runContinuation(node)
                } else {
                    redirect(node)
                }
            }
            if tryUnlockDrain() { return .unlocked }
        }
    }

    /// The drain owner's admission check for the item at the head. A barrier needs nothing
    /// in flight; another item needs a free unit of width, which it takes. On failure sets
    /// DRAIN_WAITING (plus which condition it waits for) in the same CAS, so a completion
    /// racing with us either is seen here or sees the bit.
    @inline(__always)
    final func reserveWidth(barrier: Bool) -> Bool {
        // acquiring: a barrier admitted without a CAS must see the writes of the items
        // whose completions (releasing CASes in releaseWidth) brought inFlight to zero.
        var s = state.load(ordering: .acquiring)
        let limit = UInt64(width.load(ordering: .relaxed))
        while true {
            let q = QueueState(s)
            let desired: UInt64
            let admitted: Bool
            if barrier {
                admitted = q.inFlight == 0
                desired = admitted ? s : s | QueueState.drainWaiting | QueueState.waitingForBarrier
            } else {
                admitted = q.inFlight < limit
                desired = admitted ? s + 1 : s | QueueState.drainWaiting
            }
            if admitted && desired == s { return true }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .acquiringAndReleasing)
            if done {
                if admitted && !barrier && q.inFlight == 0 { _ = Unmanaged.passUnretained(self).retain() }
                return admitted
            }
            s = now
        }
    }

    /// Hands a non-barrier item (already counted in `inFlight`) to the target queue. The
    /// item does not retain the queue: a concurrent queue holds a reference to itself
    /// while `inFlight` is non-zero (taken on 0 → 1, dropped on 1 → 0).
    @inline(__always)
    final func redirect(_ node: Continuation) {
        var carrier = node
        if node.pointee.flags & ContinuationFlags.redirected.rawValue != 0 {
            // Already holding width on an inner concurrent queue (one that targets us):
            // wrap it, so both units come back, innermost first.
            carrier = ContinuationCache.make(runRedirectedNode, UnsafeMutableRawPointer(node), [])
        }
        carrier.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        carrier.pointee.flags |= ContinuationFlags.redirected.rawValue
        unmanagedTarget!._withUnsafeGuaranteedRef { $0.push(carrier) }
    }

    /// A unit of width comes back (a redirected item or an inline sync finished). If the
    /// drain is waiting and can now proceed, reschedule it: it still owns ENQUEUED and its
    /// retain, which pass to the new drain node.
    ///
    /// `onWorker`: the caller has just run a redirected item of this queue. When that was
    /// a pool worker running it straight from a root (a worker thread inside no queue) and
    /// the target is a root queue, the resumed drain runs here at once, as a drain node
    /// pushed onto that root would have run on the next worker to pop it: it only
    /// redirects items onto the root (or runs a barrier), so the root's order of service
    /// is unchanged, without a node, a root push and pop, and the futex wake of an idle
    /// worker that push costs when the root was empty. (A saturated concurrent queue, the
    /// Swift global executor's under a task group, resumes its drain once per item.)
    @inline(__always)
    final func releaseWidth(onWorker: Bool = false) {
        var s = state.load(ordering: .relaxed)
        let limit = UInt64(width.load(ordering: .relaxed))
        while true {
            var desired = s - 1
            let q = QueueState(desired)
            var resume = false
            if q.isDrainWaiting {
                let waitsForBarrier = desired & QueueState.waitingForBarrier != 0
                if q.inFlight == 0 || (!waitsForBarrier && q.inFlight < limit) {
                    desired &= ~(QueueState.drainWaiting | QueueState.waitingForBarrier)
                    resume = true
                }
            }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .acquiringAndReleasing)
            if done {
                if resume {
                    if onWorker, gc_held_top() == nil, gc_thread_self()!.pointee.worker != nil,
                       unmanagedTarget!._withUnsafeGuaranteedRef({ $0.role == .root }) {
                        drain()  // owns ENQUEUED and the waiting drain's retain
                    } else {
                        scheduleDrain(retain: false)
                    }
                }
                if q.inFlight == 0 { Unmanaged.passUnretained(self).release() }
                return
            }
            s = now
        }
    }

    /// Gives up the drain lock. Returns true when it is given up; false when work arrived
    /// meanwhile and the caller took the lock back (it keeps draining).
    ///
    /// Clearing ENQUEUED and then checking the list, against a producer's push and then
    /// its reading of ENQUEUED, is a Dekker pair (both sequentially consistent): at least
    /// one side sees the other, so a pushed item is never stranded.
    @inline(__always)
    final func tryUnlockDrain() -> Bool {
        var s = state.load(ordering: .relaxed)
        while true {
            let (done, now) = state.weakCompareExchange(expected: s, desired: s & ~QueueState.enqueued,
                                                        ordering: .sequentiallyConsistent)
            if done { s &= ~QueueState.enqueued; break }
            s = now
        }
        if items.isEmpty && pendingHead.load(ordering: .relaxed) == 0 { return true }
        while true {
            let q = QueueState(s)
            if q.isEnqueued || q.isSuspended { return true }
            let (done, now) = state.weakCompareExchange(expected: s, desired: s | QueueState.enqueued,
                                                        ordering: .sequentiallyConsistent)
            if done { return false }
            s = now
        }
    }
}

/// Runs a continuation wrapped by `redirect` (its `context`).
let runRedirectedNode: DispatchFunction = { context in
    runContinuation(context!.assumingMemoryBound(to: gc_continuation_t.self))
}

/// Runs one continuation on the current thread.
@inline(__always)
func runContinuation(_ node: Continuation) {
    let flags = node.pointee.flags
    let function = node.pointee.function!
    let context = node.pointee.context
    if flags == 0 {
        ContinuationCache.recycle(node)
        function(context)
        return
    }
    runContinuationSlow(node, ContinuationFlags(rawValue: flags), function, context)
}

@inline(never)
func runContinuationSlow(_ node: Continuation, _ flags: ContinuationFlags,
                         _ function: DispatchFunction, _ context: UnsafeMutableRawPointer?) {
    let group = node.pointee.group
    let owner = node.pointee.owner
    if !flags.contains(.syncWaiter) { ContinuationCache.recycle(node) }
    // A sync caller's node runs here only on the thread that runs the main queue's work;
    // anywhere else its queue left the main queue after the caller pushed it, and the caller
    // runs the function itself under this thread's levels. The node is the caller's: not
    // touched after either wake.
    let waiter = flags.contains(.syncWaiter)
    if flags.contains(.redirected) {
        // The owner's self-reference (held while it has items in flight) keeps it alive.
        let ownerQueue = Unmanaged<DispatchQueue>.fromOpaque(owner!)
        ownerQueue._withUnsafeGuaranteedRef { queue in
            let recorded = ThreadNames.enter(queue)
            HeldQueues.entering(queue, exclusive: false) {
                if waiter { SyncLoan.runOrLend(node, function, context) } else { function(context) }
            }
            ThreadNames.leave(recorded)
            queue.releaseWidth(onWorker: true)
        }
    } else if waiter {
        SyncLoan.runOrLend(node, function, context)
    } else {
        function(context)
    }
    if flags.contains(.groupMember) {
        // The group's self-reference (held while its count is non-zero) keeps it alive.
        Unmanaged<DispatchGroup>.fromOpaque(group!)._withUnsafeGuaranteedRef { $0.leave() }
    }
}
