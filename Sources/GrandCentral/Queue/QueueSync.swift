import CGrandCentral
import Synchronization
import Glibc

// dispatch_sync, dispatch_barrier_sync and dispatch_async_and_wait.
//
// The contract (libdispatch's): the function runs on the calling thread, after every item
// submitted to the queue before it, and exclusive of the queue's other work exactly as an
// item of the queue would be. The one exception is a queue whose work belongs to the main
// thread (the main queue, or any queue whose target chain reaches it): there the function
// runs on the main thread.
//
// How. A sync caller takes each queue from the one it syncs onto up its target chain to
// the root, as a worker draining them would hold them: a queue it needs exclusively
// (serial, or the barrier's own queue) by its drain lock (ENQUEUED), any other by one unit
// of width. With every level held, it runs the function on its own thread, then gives the
// levels back innermost first (`syncRelease`), which schedules whatever queued up behind it.
//
// - Fast path: a queue that is idle — no drain scheduled or running, nothing queued, not
//   suspended — is taken at once with one compare-exchange. It is never taken while items
//   are queued: that would overtake them (FIFO is a promise, also for items the caller
//   itself submitted a moment ago while a drain was between two items).
// - Slow path: the caller pushes a waiter node (on its own stack, `syncHandoff`) behind
//   what is queued and parks. The drain, reaching it, runs nothing: it hands the queue over
//   — its drain lock (the drain stops, `DrainOutcome.handedOff`), or the unit of width it
//   reserved for the node — and wakes the caller, who goes on to the next level. A caller
//   thus climbs a chain level by level, holding what it has taken, as libdispatch's does.
//
// - Retargeting while a caller waits. A caller that climbs onto the main queue (its queue
//   was retargeted onto it meanwhile) has the main thread run the function under the levels
//   it holds (`runUnderCallerFrames`), or runs it itself if it is the main thread. A caller
//   that parked for the main thread (`syncWaiter`) whose queue then left the main queue is
//   reached by a drain on a worker; that drain lends it its levels (`SyncLoan`) instead of
//   running the function. Either way the function runs on the caller's thread or on the
//   main thread, with every level's frame.
//
// Rejected: running the function on the drainer's thread and waking the caller afterwards
// (GrandCentral's first version). Exclusion is trivial that way, but the function loses
// its thread: thread-local storage, errno, a recursive mutex the caller holds,
// pthread_self() comparisons and thread-bound resources all see the wrong thread.

/// The futex handshake between a parked sync caller and the thread that lets it go on. The
/// word is the node's `waiter_word` (on the caller's stack), 0 until the caller may go on.
enum SyncWaiter {
    @inline(__always)
    static func word(of node: Continuation) -> UnsafeMutablePointer<UInt32> {
        // The low half of the pointer-sized field, little-endian (x86_64, aarch64).
        UnsafeMutableRawPointer(node)
            .advanced(by: MemoryLayout<gc_continuation_t>.offset(of: \.waiter_word)!)
            .assumingMemoryBound(to: UInt32.self)
    }

    /// The word's values: 0 while the caller waits; `released` when it may go on (its
    /// function ran, or the queue is handed to it); `lent` when a drainer lends it its
    /// levels to run the function under (`SyncLoan`, in the node's `slot.sync_loan`).
    static let released: UInt32 = 1
    static let lent: UInt32 = 2

    /// Lets the caller parked on `node` go on. The node is on the caller's stack, which may
    /// be gone as soon as the word is set: nothing touches the node after the store (a futex
    /// wake on a dead address is harmless; every futex wait here tolerates spurious wakes).
    @inline(__always)
    static func wake(_ node: Continuation, _ value: UInt32 = released) {
        let w = word(of: node)
        gc_word_store(w, value)
        gc_futex_wake(w, 1)
    }

    /// Pushes a waiter node with `flags` onto `queue` and parks until it is woken. The wait
    /// is announced to the pool (BlockingRegion), so a worker that waits here is replaced.
    /// Returns the lender's `SyncLoan` when the node was lent to the caller (a `syncWaiter`
    /// node reached by a drain off the main thread), else nil.
    static func park(on queue: DispatchQueue, flags: ContinuationFlags,
                     _ function: DispatchFunction?, _ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        withUnsafeTemporaryAllocation(of: gc_continuation_t.self, capacity: 1) { buffer in
            let node = buffer.baseAddress!
            node.initialize(to: gc_continuation_t(next: nil, function: function, context: context,
                                                  flags: flags.rawValue, group: nil, owner: nil,
                                                  slot: gc_continuation_slot_t(), waiter_word: 0))
            let w = word(of: node)
            queue.push(node)
            BlockingRegion.enter()
            while gc_word_load(w) == 0 { _ = gc_futex_wait(w, 0, -1) }
            BlockingRegion.leave()
            // The waker stored `slot.sync_loan` before the word (gc_word_store releases,
            // gc_word_load acquires).
            return gc_word_load(w) == lent ? node.pointee.slot.sync_loan : nil
        }
    }
}

/// A `syncWaiter` node reached by a drain on a thread that does not run the main queue's
/// work: the queue was retargeted off the main queue after the caller pushed its node (or
/// a queue above it was). The drainer must not run the function (it would run on a worker,
/// not on the caller's thread); it lends the caller what it holds instead. It stores its
/// levels (its innermost held frame, whose chain covers the queue the node was on and every
/// queue above it that the drainer holds) and a futex word of its own in a `SyncLoan` on its
/// stack, wakes the caller with `SyncWaiter.lent`, and waits (announced to the pool) until
/// the caller has run the function under those frames and set the word. Exclusion is the
/// drainer's: it holds the levels throughout, as if it ran the item itself.
///
/// Rejected: converting such a node into a hand-off (the drain stops and the caller climbs
/// on from the queue). Every drain kind would need a second hand-off path, and a redirected
/// node is already past its queue's drain, holding a unit of width on the way to a root.
struct SyncLoan {
    var frames: UnsafeMutablePointer<gc_held_frame_t>?
    var done: UInt32 = 0

    /// Runs a `syncWaiter` node's function here if this thread runs the main queue's work
    /// (the main thread, or whoever drains the main queue), else lends it to its caller.
    static func runOrLend(_ node: Continuation, _ function: DispatchFunction, _ context: UnsafeMutableRawPointer?) {
        if isMainThread() || HeldQueues.contains(where: { queue, _ in queue.role == .main || queue.role == .runloop }) {
            function(context)
            SyncWaiter.wake(node)
            return
        }
        if ThreadPool.shared.debug {
            DebugLog.pool("a drain off the main thread reached a dispatch_sync caller's node whose queue left the main "
                + "queue: lending the caller its levels, waiting until its function has run")
        }
        var loan = SyncLoan(frames: gc_held_top())
        withUnsafeMutablePointer(to: &loan) { pointer in
            node.pointee.slot.sync_loan = UnsafeMutableRawPointer(pointer)
            let w = UnsafeMutableRawPointer(pointer).advanced(by: MemoryLayout<SyncLoan>.offset(of: \.done)!)
                .assumingMemoryBound(to: UInt32.self)
            SyncWaiter.wake(node, SyncWaiter.lent)
            BlockingRegion.enter()
            while gc_word_load(w) == 0 { _ = gc_futex_wait(w, 0, -1) }
            BlockingRegion.leave()
        }
    }

    /// The caller's side: runs the function under the lender's frames, then lets the
    /// lender go on. Nothing touches the loan after the store.
    static func runLent(_ raw: UnsafeMutableRawPointer, _ function: DispatchFunction, _ context: UnsafeMutableRawPointer?) {
        let loan = raw.assumingMemoryBound(to: SyncLoan.self)
        let previous = gc_held_top()
        gc_held_restore(loan.pointee.frames)
        function(context)
        gc_held_restore(previous)
        let w = raw.advanced(by: MemoryLayout<SyncLoan>.offset(of: \.done)!).assumingMemoryBound(to: UInt32.self)
        gc_word_store(w, 1)
        gc_futex_wake(w, 1)
    }
}

/// A sync caller that climbed onto the main queue (`syncClimb`): the main thread runs the
/// function under the caller's levels, linked above its own frames.
private struct MainThreadCall {
    let call: UnsafeMutablePointer<SyncCall>
    let outermost: UnsafeMutablePointer<gc_held_frame_t>
}

private let runUnderCallerFrames: DispatchFunction = { raw in
    let pointee = raw!.assumingMemoryBound(to: MainThreadCall.self).pointee
    let previous = gc_held_enter_chain(pointee.call.pointee.innermost!, pointee.outermost)
    pointee.call.pointee.function(pointee.call.pointee.context)
    gc_held_restore(previous)
}

/// One sync call climbing its target chain (on the caller's stack).
struct SyncCall {
    let function: DispatchFunction
    let context: UnsafeMutableRawPointer?
    /// The frame of the queue the call syncs onto, the innermost of the chain's frames.
    var innermost: UnsafeMutablePointer<gc_held_frame_t>?
}

extension DispatchQueue {
    /// Takes this queue for a sync caller without waiting, if it is idle (see the top of
    /// the file). `exclusive`: the drain lock; otherwise one unit of width.
    @inline(__always)
    final func trySyncAcquire(exclusive: Bool) -> Bool {
        // sequentiallyConsistent, the load and the CAS: a taken queue is given back by
        // `syncRelease` → tryUnlockDrain (clear ENQUEUED, then look at the list), which is
        // one side of the Dekker pair with a producer's push (tail exchange) and then its
        // `wakeup` load of ENQUEUED; and a successful CAS acquires the last drain's unlock
        // CAS, so the items that drain ran happen before this caller's function.
        var s = state.load(ordering: .sequentiallyConsistent)
        let limit = UInt64(width.load(ordering: .relaxed))
        while true {
            let q = QueueState(s)
            if q.isEnqueued || q.isSuspended { return false }
            // Queued items go first. An item the caller pushed earlier is either still
            // queued (seen here) or was popped by a drain that holds ENQUEUED until it has
            // run (seen above): either way the caller waits for it. An item another thread
            // is pushing right now is concurrent with this call, so either order is right;
            // if we win, our release sees it and wakes the queue.
            if !items.isEmpty || pendingHead.load(ordering: .relaxed) != 0 { return false }
            let desired: UInt64
            if exclusive {
                if q.inFlight != 0 { return false }
                desired = s | QueueState.enqueued
            } else {
                if q.inFlight >= limit { return false }
                desired = s + 1
            }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .sequentiallyConsistent)
            if done {
                // Width held: the queue references itself while anything is in flight.
                if !exclusive && q.inFlight == 0 { _ = Unmanaged.passUnretained(self).retain() }
                return true
            }
            s = now
        }
    }

    /// Takes this queue for a sync caller, waiting for a hand-off from its drain if it is
    /// not idle.
    @inline(__always)
    final func syncAcquire(exclusive: Bool) {
        if trySyncAcquire(exclusive: exclusive) { return }
        // The node is a barrier exactly when the caller needs the drain lock, so a
        // concurrent drain hands it the lock (and a serial drain ignores the flag).
        // A hand-off node is never lent (only `syncWaiter` nodes are): nothing to run here.
        _ = SyncWaiter.park(on: self, flags: exclusive ? [.syncHandoff, .barrier] : .syncHandoff, nil, nil)
    }

    /// Gives back what `syncAcquire` took, as the end of a drain would: the drain lock is
    /// given up, or taken back to schedule a drain if items arrived meanwhile; a unit of
    /// width is returned, which may let a waiting drain go on.
    @inline(__always)
    final func syncRelease(exclusive: Bool) {
        if exclusive {
            if !tryUnlockDrain() {
                // Items arrived meanwhile and we hold the drain lock again. When the next
                // one is another sync caller waiting for the lock, hand it over here, as
                // libdispatch does: passing a busy queue from one sync caller to the next
                // must not need a worker thread (they may all be parked in such syncs).
                // Anything else goes back to the drain we schedule (`pendingHead`, taken
                // first by drainSerial and drainConcurrent).
                // usesWidth acquiring: pairs with setWidth's releasing store. The state load
                // is sequentially consistent like the drain's post-pop check, against a
                // suspender's RMW (QueueLifecycle) then its push.
                if !usesWidth.load(ordering: .acquiring),
                   !QueueState(state.load(ordering: .sequentiallyConsistent)).isSuspended,
                   let node = items.pop() {
                    let handoff = ContinuationFlags.syncHandoff.rawValue | ContinuationFlags.barrier.rawValue
                    // Checked again after the pop (see drainSerial): a caller that synced
                    // after a suspend must wait for the resume, so it goes to the drain.
                    if node.pointee.flags & handoff == handoff,
                       !QueueState(state.load(ordering: .relaxed)).isSuspended {
                        // A caller waiting for the drain lock (not for a unit of width,
                        // which only the drain hands out): it is theirs now.
                        SyncWaiter.wake(node)
                        return
                    }
                    // Releasing: pairs with popSerial's/drainConcurrent's acquiring load of
                    // `pendingHead` in the drain scheduled below (the push of its drain
                    // node orders it too).
                    pendingHead.store(UInt(bitPattern: node), ordering: .releasing)
                }
                scheduleDrain(retain: true)
            }
        } else {
            releaseWidth()
        }
    }

    /// `dispatch_sync_f` / `dispatch_barrier_sync_f` / `…_async_and_wait_f`.
    final func sync(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                    barrier: Bool, caller: StaticString) {
        // The common case: a root queue (no drain to take: run inline, as libdispatch does,
        // with the root queue as the current queue), or one idle queue above a root queue.
        let taken = syncInlineAcquire(barrier: barrier)
        if taken != .none {
            HeldQueues.entering(self, exclusive: taken == .exclusive) { function(context) }
            syncInlineRelease(taken)
            return
        }
        syncSlow(function, context, barrier: barrier, caller: caller)
    }

    /// How the Swift API's `sync` took this queue on its inline path (`syncInlineAcquire`).
    enum SyncInline {
        /// Not taken: use `sync(_:_:barrier:caller:)`.
        case none
        /// A root queue: run inline with nothing to give back.
        case root
        /// One unit of width of a concurrent queue.
        case shared
        /// The whole queue (serial, or a barrier).
        case exclusive
    }

    /// The fast path of every sync: takes this queue when it is a root queue, or an idle
    /// queue directly above one that it can take at once. The C entry points then call the
    /// function; the Swift API runs its closure in its own frame (no function-and-context
    /// conversion, no allocation, no generic helper). The caller gives the queue back with
    /// `syncInlineRelease`.
    @inline(__always)
    final func syncInlineAcquire(barrier: Bool) -> SyncInline {
        if role == .root { return .root }
        guard role != .main, role != .runloop, let target = unmanagedTarget,
              target._withUnsafeGuaranteedRef({ $0.role == .root }) else { return .none }
        let exclusive = barrier || isSerial
        guard trySyncAcquire(exclusive: exclusive) else { return .none }
        return exclusive ? .exclusive : .shared
    }

    /// Gives back what `syncInlineAcquire` took.
    @inline(__always)
    final func syncInlineRelease(_ taken: SyncInline) {
        switch taken {
        case .none, .root: return
        case .shared: syncRelease(exclusive: false)
        case .exclusive: syncRelease(exclusive: true)
        }
    }

    @inline(never)
    final func syncSlow(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                        barrier: Bool, caller: StaticString) {
        checkSyncDeadlock(barrier: barrier, caller: caller)
        if targetChainReachesMain {
            syncOnMainThread(function, context, barrier: barrier)
            return
        }
        var call = SyncCall(function: function, context: context, innermost: nil)
        withUnsafeMutablePointer(to: &call) { syncClimb(exclusive: barrier || isSerial, $0, inner: nil) }
    }

    /// Takes this queue, then (recursively) the next one up the target chain; at the root,
    /// runs the call's function with every level held and entered on the held-queue stack
    /// (this queue's frame inside its target's, so the queue synced onto is the current
    /// one); gives this queue back on the way out, innermost first.
    final func syncClimb(exclusive: Bool, _ call: UnsafeMutablePointer<SyncCall>,
                         inner: UnsafeMutablePointer<gc_held_frame_t>?) {
        syncAcquire(exclusive: exclusive)
        // Read once: the target this level's drain would push to while we hold it.
        let next = targetQueue!
        var frame = gc_held_frame_t(outer: nil, queue: HeldQueues.encode(self, exclusive: exclusive))
        withUnsafeMutablePointer(to: &frame) { f in
            if let inner { inner.pointee.outer = f } else { call.pointee.innermost = f }
            switch next.role {
            case .root:
                let previous = gc_held_enter_chain(call.pointee.innermost!, f)
                call.pointee.function(call.pointee.context)
                gc_held_restore(previous)
            case .main where isMainThread():
                // Retargeted onto the main queue while the main thread climbed: it runs the
                // main queue's work, here as anywhere (waiting for its own drain would never
                // end).
                let previous = gc_held_enter_chain(call.pointee.innermost!, f)
                call.pointee.function(call.pointee.context)
                gc_held_restore(previous)
            case .main, .runloop:
                // Retargeted onto the main queue while we climbed: its work belongs to the
                // main thread, which runs it under the levels we hold.
                var onMain = MainThreadCall(call: call, outermost: f)
                withUnsafeMutablePointer(to: &onMain) {
                    next.syncOnMainThread(runUnderCallerFrames, UnsafeMutableRawPointer($0), barrier: false)
                }
            case .serial, .concurrent:
                next.syncClimb(exclusive: next.isSerial, call, inner: f)
            }
        }
        syncRelease(exclusive: exclusive)
    }

    /// True when this queue is the main queue or its target chain reaches it (or a run
    /// loop's queue: its work, too, runs on one thread, not the caller's).
    final var targetChainReachesMain: Bool {
        var queue: DispatchQueue? = self
        while let q = queue {
            if q.role == .main || q.role == .runloop { return true }
            queue = q.targetQueue
        }
        return false
    }

    /// A sync onto a queue whose work runs on the main thread: the node waits in line, the
    /// main thread's drain runs the function (`syncWaiter`) and then wakes the caller.
    final func syncOnMainThread(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                                barrier: Bool) {
        if let loan = SyncWaiter.park(on: self, flags: barrier ? [.syncWaiter, .barrier] : .syncWaiter, function, context) {
            // Retargeted off the main queue meanwhile: a drain lent us its levels.
            SyncLoan.runLent(loan, function, context)
        }
    }

    /// A sync that must wait for a queue this thread is itself inside of would wait
    /// forever: report it, as libdispatch does. Along the target chain: a queue the sync
    /// needs exclusively (serial, or the barrier's own queue) must not be held by this
    /// thread at all; one it needs a unit of width of must not be held exclusively (a
    /// barrier or the drain of that queue). The main queue belongs to the main thread.
    ///
    /// Not caught (libdispatch does not either): a cycle through another thread.
    final func checkSyncDeadlock(barrier: Bool, caller: StaticString) {
        let onMainThread = isMainThread()
        var queue: DispatchQueue? = self
        var first = true
        while let q = queue, q.role != .root {
            if q.role == .main && onMainThread {
                clientBug(caller, "dispatch_sync onto the main queue (or a queue targeting it) from the main thread (deadlock)")
            }
            let exclusive = first ? (barrier || q.isSerial) : q.isSerial
            if HeldQueues.contains(where: { held, heldExclusively in held === q && (exclusive || heldExclusively) }) {
                clientBug(caller, "dispatch_sync called on a queue already owned by the current thread (deadlock)")
            }
            first = false
            queue = q.targetQueue
        }
    }
}

/// The main thread's kernel id is the process id. Both ids are cached (no system call per
/// ask) and forgotten in a forked child, so the answer stays right there.
@inline(__always)
func isMainThread() -> Bool { gc_thread_id() == gc_process_id() }
