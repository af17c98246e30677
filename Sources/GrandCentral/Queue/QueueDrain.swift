import CGrandCentral
import Synchronization

// Draining: the protocol every queue-like object (a queue, a source) shares, and how the
// thread that owns a queue's drain (ENQUEUED, see QueueState) runs its items.
//
// The shared drain (`DrainedObject`). An object has a state word with a drain lock bit
// (ENQUEUED: QueueState, SourceState) and a target queue. Four steps, written once here:
// - take: whoever makes the object runnable (a push onto an empty list, a resume, an event)
//   sets ENQUEUED with one compare-exchange (`DrainLock.take`) and schedules one drain node
//   on the target (`pushDrainNode`), which carries one ARC retain of the object;
// - run: the node runs the kind's drain (`drainWork`: "is there work?" and "run it") under
//   a `DrainBudget`, after which it yields its thread back to the target;
// - end: every drain a node runs ends through `finishDrain` with a `DrainOutcome`, the one
//   place the lock and the retain change hands;
// - give back: clear ENQUEUED, then look for work once more (`DrainLock.giveBack`), so an
//   item or event published meanwhile is never stranded.
// The main queue and a run loop's queue are drained by their own threads, not by a node:
// they take the lock the same way and give it back with `tryUnlockDrain`, holding no retain.
// Rejected: a common base class for queues and sources between them and DispatchObject
// (DispatchQueue is public API, and a public class cannot inherit from an internal one;
// a public one would put engine internals in the Swift API). The protocol's conformers
// are concrete, so whole-module optimization specializes every shared function for each
// kind: no witness-table call on the hot path (callgrind: the async and merge paths run the
// same instructions as the two copies did).
//
// A queue's drain. A serial queue's items run here one by one. A concurrent queue's drain
// is a dispatcher: it hands each non-barrier item to the target ("redirects" it, holding one
// unit of width until it completes) and runs barriers itself once nothing is in flight.

/// Items a queue's drain runs before it yields its thread back to the target, so one busy
/// queue does not starve others on the same root queue.
let drainBudget = 1024

/// A queue-like object drained on a target queue under a drain lock: a queue or a source.
/// See the top of this file.
protocol DrainedObject: AnyObject {
    /// The function a drain node of this kind runs; its context is the object, carrying
    /// the drain's retain. It calls `drain()`.
    static var drainNodeFunction: DispatchFunction { get }
    /// The flags of a drain node of this kind.
    static var drainNodeFlags: ContinuationFlags { get }
    /// The per-kind hook: runs what the object has, under a `DrainBudget`, until nothing is
    /// runnable (the lock given back), the budget is spent, or the kind must stop. Called
    /// with the lock and the drain's retain; says what becomes of them.
    func drainWork() -> DrainOutcome
    /// Schedules a drain of this object (the caller owns ENQUEUED): one node on its target
    /// (`pushDrainNode`), or for a queue drained by its own thread, a wake of that thread.
    /// `retain`: take the drain's retain (false when a yielding drain passes its own on).
    func scheduleDrain(retain: Bool)
}

extension DrainedObject {
    /// Entered through a scheduled drain node; owns ENQUEUED and one ARC retain.
    @inline(__always)
    func drain() {
        finishDrain(drainWork())
    }

    /// What happens to the drain lock and the drain's retain when a drain stops.
    @inline(__always)
    func finishDrain(_ outcome: DrainOutcome) {
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

    /// Pushes one drain node of this object onto `target`. `retain`: the node's retain of
    /// the object is taken here; otherwise the caller's passes on with the node.
    /// `callerHoldsObject`: the caller holds a reference of its own to the object, which
    /// holds the target. Otherwise the target is held across the push: once the node is
    /// visible it may run, and the object (and its hold on the target) go away mid-push.
    @inline(__always)
    func pushDrainNode(onto target: Unmanaged<DispatchQueue>, retain: Bool, callerHoldsObject: Bool) {
        let node = ContinuationCache.make(Self.drainNodeFunction, Unmanaged.passUnretained(self).toOpaque(),
                                          Self.drainNodeFlags)
        if retain { _ = Unmanaged.passUnretained(self).retain() }
        if retain && callerHoldsObject {
            target._withUnsafeGuaranteedRef { $0.push(node) }
        } else {
            let held = target.retain()
            held._withUnsafeGuaranteedRef { $0.push(node) }
            held.release()
        }
    }
}

/// The drain lock's two transitions, on an object's state word `word` whose bit `lock` is
/// ENQUEUED. Whoever takes the lock owns the drain until it gives it back; the word's
/// other bits are the kind's (QueueState, SourceState).
enum DrainLock {
    /// Takes the lock if it is free and `hasWork(state)` says a drain would find something
    /// to run; sets `also` in the same compare-exchange. Returns whether it was taken (the
    /// caller then schedules the drain).
    ///
    /// The load and the compare-exchange are sequentially consistent: the producer's side
    /// of the Dekker pair with `giveBack` — it published its work (a list push, an atomic
    /// on this word), then reads the lock; the owner clears the lock, then looks for work.
    @inline(__always)
    static func take(_ word: borrowing Atomic<UInt64>, lock: UInt64, also: UInt64 = 0,
                     when hasWork: (UInt64) -> Bool) -> Bool {
        var s = word.load(ordering: .sequentiallyConsistent)
        while true {
            if s & lock != 0 || !hasWork(s) { return false }
            let (done, now) = word.weakCompareExchange(expected: s, desired: s | lock | also,
                                                       ordering: .sequentiallyConsistent)
            if done { return true }
            s = now
        }
    }

    /// Gives the lock back: clear, then recheck. Returns true when it is given up; false
    /// when work arrived meanwhile and the caller holds the lock again (it keeps draining).
    ///
    /// Work published in the word itself (`workInWord`: a source's PENDING, ...) keeps the
    /// lock: the compare-exchange that would clear it either sees that bit or precedes the
    /// RMW that sets it, whose `take` then finds the lock free. Work published elsewhere
    /// (`workElsewhere`: a queue's list) is looked for after the clear: clearing ENQUEUED
    /// and then reading the list, against a producer's push and then its reading of
    /// ENQUEUED (`take`), is a Dekker pair (both sequentially consistent): at least one side
    /// sees the other. When work is found, the lock is taken back unless another thread
    /// took it, or `mayRetake(state)` says no drain may run now (a suspended queue: its
    /// resume's wakeup takes the lock).
    @inline(__always)
    static func giveBack(_ word: borrowing Atomic<UInt64>, lock: UInt64, keepFor workInWord: (UInt64) -> Bool,
                         workElsewhere: () -> Bool, mayRetake: (UInt64) -> Bool) -> Bool {
        var s = word.load(ordering: .relaxed)
        while true {
            if workInWord(s) { return false }
            let (done, now) = word.weakCompareExchange(expected: s, desired: s & ~lock,
                                                       ordering: .sequentiallyConsistent)
            if done { s &= ~lock; break }
            s = now
        }
        if !workElsewhere() { return true }
        while true {
            if s & lock != 0 || !mayRetake(s) { return true }
            let (done, now) = word.weakCompareExchange(expected: s, desired: s | lock,
                                                       ordering: .sequentiallyConsistent)
            if done { return false }
            s = now
        }
    }
}

/// Units of work (a queue's items, a source's handler calls) a drain runs before it yields
/// its thread back to the target, so one busy object does not starve others on the same
/// target.
struct DrainBudget {
    private let size: Int
    private var left: Int

    @inline(__always) init(_ size: Int) {
        self.size = size
        left = size
    }

    /// Counts one unit run. True when the budget is spent and `workRemains()`: the drain
    /// yields (`DrainOutcome.yielded`). Spent with nothing left, it starts again.
    @inline(__always)
    mutating func spend(workRemains: () -> Bool) -> Bool {
        left -= 1
        if left > 0 { return false }
        if workRemains() { return true }
        left = size
        return false
    }
}

/// How a drain ended, and so what becomes of the drain lock (ENQUEUED) and the ARC retain
/// the drain owns. Every drain a node runs, of every kind, ends through `finishDrain`: the
/// one place the drain lock changes hands. Sources end only `unlocked` or `yielded`.
enum DrainOutcome {
    /// Nothing runnable is left and the lock is given up (`tryUnlockDrain`).
    case unlocked
    /// The budget ran out with work left, or the kind must wait elsewhere (a source whose
    /// target chain is suspended, or that was retargeted): the drain keeps the lock and its
    /// retain, and its node goes to the back of its target's line.
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

extension DispatchQueue: DrainedObject {
    static var drainNodeFunction: DispatchFunction { drainTrampoline }
    static var drainNodeFlags: ContinuationFlags { .drainQueue }

    /// A queue's drain (the per-kind hook): a serial queue runs its items in order, a
    /// concurrent queue dispatches them through its width.
    @inline(__always)
    final func drainWork() -> DrainOutcome {
        let recorded = ThreadNames.enter(self)  // for the worker's name (ThreadNames)
        // usesWidth acquiring: pairs with setWidth's releasing store.
        let outcome = HeldQueues.entering(self, exclusive: true) {
            usesWidth.load(ordering: .acquiring) ? drainConcurrent() : drainSerial()
        }
        ThreadNames.leave(recorded)
        return outcome
    }

    /// Runs a serial queue's items in order, on this thread.
    final func drainSerial() -> DrainOutcome {
        var budget = DrainBudget(drainBudget)
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
                if budget.spend(workRemains: { !items.isEmpty }) { return .yielded }
            }
            if tryUnlockDrain() { return .unlocked }
        }
    }

    /// The next item of a serial queue: the one a releasing sync caller put back
    /// (`syncRelease` stashes it in `pendingHead` before scheduling this drain), else the
    /// list's head.
    @inline(__always)
    final func popSerial() -> Continuation? {
        // Acquiring: pairs with syncRelease's releasing store of the item it put back.
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
                // Acquiring: pairs with syncRelease's releasing store, as in popSerial.
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
            // Releasing: the item's writes, for the barrier that reserveWidth admits once
            // inFlight reaches zero (its acquiring load or CAS). Acquiring: pairs with that
            // CAS's release when it set DRAIN_WAITING, whose drain this completion resumes.
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

    /// Gives up the drain lock (`DrainLock.giveBack`). Returns true when it is given up;
    /// false when items arrived meanwhile and the caller took the lock back (it keeps
    /// draining). A queue's work is all in its list (and `pendingHead`), none in the word;
    /// a suspended queue is not taken back (its resume's wakeup will).
    @inline(__always)
    final func tryUnlockDrain() -> Bool {
        DrainLock.giveBack(state, lock: QueueState.enqueued, keepFor: { _ in false },
                           workElsewhere: { !items.isEmpty || pendingHead.load(ordering: .relaxed) != 0 },
                           mayRetake: { !QueueState($0).isSuspended })
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
