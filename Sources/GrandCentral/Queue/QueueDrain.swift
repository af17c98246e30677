import CGrandCentral
import Synchronization

// Draining: how the thread that owns a queue's drain (ENQUEUED, see QueueState) runs its
// items. A serial queue's items run here one by one. A concurrent queue's drain is a
// dispatcher: it hands each non-barrier item to the target ("redirects" it, holding one
// unit of width until it completes) and runs barriers itself once nothing is in flight.

/// Items a drain runs before it yields its thread back to the target, so one busy queue
/// does not starve others on the same root queue.
let drainBudget = 1024

extension DispatchQueue {
    /// Entered through a scheduled drain node; owns ENQUEUED and one ARC retain.
    final func drain() {
        if usesWidth.load(ordering: .acquiring) { drainConcurrent() } else { drainSerial() }
    }

    final func drainSerial() {
        HeldQueues.push(self, exclusive: true)
        var budget = drainBudget
        while true {
            while !QueueState(state.load(ordering: .relaxed)).isSuspended, let node = items.pop() {
                runContinuation(node)
                budget -= 1
                if budget <= 0 {
                    if !items.isEmpty {
                        // Yield: keep the drain (ENQUEUED and the retain) and go to the back
                        // of the target's line.
                        HeldQueues.pop()
                        scheduleDrain(retain: false)
                        return
                    }
                    budget = drainBudget
                }
            }
            if tryUnlockDrain() { break }
        }
        HeldQueues.pop()
        Unmanaged.passUnretained(self).release()
    }

    final func drainConcurrent() {
        HeldQueues.push(self, exclusive: true)
        while true {
            while !QueueState(state.load(ordering: .relaxed)).isSuspended {
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
                let isBarrier = node.pointee.flags & ContinuationFlags.barrier.rawValue != 0
                if !reserveWidth(barrier: isBarrier) {
                    // DRAIN_WAITING is set; the completion that clears it reschedules us.
                    // `pendingHead` holds the node; the drain stays owned.
                    HeldQueues.pop()
                    return
                }
                pendingHead.store(0, ordering: .relaxed)
                if isBarrier {
                    runContinuation(node)
                } else {
                    redirect(node)
                }
            }
            if tryUnlockDrain() { break }
        }
        HeldQueues.pop()
        Unmanaged.passUnretained(self).release()
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
    @inline(__always)
    final func releaseWidth() {
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
                if resume { scheduleDrain(retain: false) }
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
    let waiter = node.pointee.waiter
    if !flags.contains(.syncWaiter) { ContinuationCache.recycle(node) }
    if flags.contains(.redirected) {
        // The owner's self-reference (held while it has items in flight) keeps it alive.
        let ownerQueue = Unmanaged<DispatchQueue>.fromOpaque(owner!)
        ownerQueue._withUnsafeGuaranteedRef { HeldQueues.push($0, exclusive: false) }
        function(context)
        HeldQueues.pop()
        ownerQueue._withUnsafeGuaranteedRef { $0.releaseWidth() }
    } else {
        function(context)
    }
    if flags.contains(.groupMember) {
        // The group's self-reference (held while its count is non-zero) keeps it alive.
        Unmanaged<DispatchGroup>.fromOpaque(group!)._withUnsafeGuaranteedRef { $0.leave() }
    }
    if flags.contains(.syncWaiter) {
        SyncWaiter.signal(waiter!)
    }
}

/// The queues the current thread is inside of (draining, running a redirected item of, or
/// holding for a sync), innermost last: what `dispatch_get_current_queue`,
/// `dispatch_get_specific` and `dispatch_assert_queue` consult, and how a `dispatch_sync`
/// that would deadlock is caught. Lives in the thread's `gc_thread_t`; only that thread
/// touches it. Entries are unretained queue pointers (a queue is alive while a thread is
/// inside it) whose low bit is set when the thread holds the queue exclusively: its drain
/// lock (a serial queue's drain, a concurrent queue's dispatcher or barrier, an exclusive
/// sync), as opposed to one unit of a concurrent queue's width.
enum HeldQueues {
    @inline(__always)
    static func push(_ queue: DispatchQueue, exclusive: Bool) {
        let raw = UInt(bitPattern: Unmanaged.passUnretained(queue).toOpaque()) | (exclusive ? 1 : 0)
        gc_held_push(UnsafeMutableRawPointer(bitPattern: raw))
    }

    @inline(__always)
    static func pop() { gc_held_pop() }

    @inline(__always)
    private static func decode(_ raw: UnsafeMutableRawPointer) -> (DispatchQueue, Bool) {
        let bits = UInt(bitPattern: raw)
        let queue = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~1)!).takeUnretainedValue()
        return (queue, bits & 1 != 0)
    }

    /// The innermost queue, or nil outside any queue.
    static var current: DispatchQueue? {
        guard let top = gc_held_top() else { return nil }
        return decode(top).0
    }

    /// Calls `body` for every held queue (and whether it is held exclusively), innermost
    /// first; stops when it returns true.
    static func contains(where body: (DispatchQueue, Bool) -> Bool) -> Bool {
        var i = Int(gc_held_depth()) - 1
        while i >= 0 {
            let (queue, exclusive) = decode(gc_held_at(UInt32(i))!)
            if body(queue, exclusive) { return true }
            i -= 1
        }
        return false
    }
}
