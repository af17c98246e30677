import CGrandCentral
import Synchronization
import Glibc

// dispatch_sync and friends.
//
// Fast path: the caller takes the queue itself — the drain lock of a serial queue (or, for
// a barrier, of a concurrent one), a unit of width of a concurrent one — and likewise
// every queue up the target chain, then runs the function on its own thread and gives the
// queues back. It needs each queue idle (serial: not enqueued, nothing queued; concurrent:
// no drain scheduled) and not suspended.
//
// Slow path: a waiter node on the caller's stack is pushed like any item; whoever drains
// it runs the function on its own thread, then wakes the caller. The caller announces the
// wait to the pool (BlockingRegion). Running the function on the drainer's thread keeps
// the whole target chain's exclusion intact without handing locks between threads.

/// The futex handshake of a sync waiter: the word is the node's `waiter_word` field (on the
/// waiter's stack), 0 until the function has run.
enum SyncWaiter {
    @inline(__always)
    static func signal(_ word: UnsafeMutableRawPointer) {
        let w = word.assumingMemoryBound(to: UInt32.self)
        gc_word_store(w, 1)
        // The waiter may return (and its stack go away) as soon as it sees 1; waking a
        // futex on a dead address is harmless.
        gc_futex_wake(w, 1)
    }
}

extension DispatchQueue {
    /// Tries to take this queue for a sync caller without waiting.
    @inline(__always)
    final func trySyncAcquire(exclusive: Bool) -> Bool {
        var s = state.load(ordering: .sequentiallyConsistent)
        let limit = UInt64(width.load(ordering: .relaxed))
        while true {
            let q = QueueState(s)
            if q.isEnqueued || q.isSuspended { return false }
            let desired: UInt64
            if exclusive {
                // Items queued while the queue is neither enqueued nor suspended belong to a
                // producer between its push and its wakeup: concurrent with us, so we may
                // go first; our release sees them and wakes the queue.
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

    /// Gives back what `trySyncAcquire` took.
    @inline(__always)
    final func syncRelease(exclusive: Bool) {
        if exclusive {
            if !tryUnlockDrain() {
                // Work arrived while we held it and we now own the drain again: schedule it.
                scheduleDrain(retain: true)
            }
        } else {
            releaseWidth()
        }
    }

    /// `dispatch_sync_f` / `dispatch_barrier_sync_f` / `…_async_and_wait_f`.
    final func sync(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                    barrier: Bool, caller: StaticString) {
        if role == .root {
            // A root queue has no drain to take: run inline, as libdispatch does, with the
            // root queue as the current queue.
            HeldQueues.push(self, exclusive: false)
            function(context)
            HeldQueues.pop()
            return
        }
        if role != .main, let target = unmanagedTarget {
            let exclusive = barrier || isSerial
            if target._withUnsafeGuaranteedRef({ $0.role == .root }) {
                // The common case: one queue above a root queue.
                if trySyncAcquire(exclusive: exclusive) {
                    HeldQueues.push(self, exclusive: exclusive)
                    function(context)
                    HeldQueues.pop()
                    syncRelease(exclusive: exclusive)
                    return
                }
            } else if syncThroughChain(function, context, exclusive: exclusive) {
                return
            }
        }
        syncSlow(function, context, barrier: barrier, caller: caller)
    }

    /// The fast path for a queue whose target is not a root queue: take every queue up to
    /// the root, outermost last. Gives up (and gives everything back) at the first refusal.
    final func syncThroughChain(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                                exclusive: Bool) -> Bool {
        var chain: [(DispatchQueue, Bool)] = []
        var queue: DispatchQueue = self
        var first = true
        while queue.role != .root {
            if queue.role == .main { break }
            let takeExclusive = first ? exclusive : queue.isSerial
            if !queue.trySyncAcquire(exclusive: takeExclusive) { break }
            chain.append((queue, takeExclusive))
            first = false
            guard let next = queue.targetQueue else { break }
            queue = next
        }
        if queue.role != .root {
            for (held, mode) in chain.reversed() { held.syncRelease(exclusive: mode) }
            return false
        }
        for (held, mode) in chain.reversed() { HeldQueues.push(held, exclusive: mode) }
        function(context)
        for _ in chain { HeldQueues.pop() }
        for (held, mode) in chain { held.syncRelease(exclusive: mode) }
        return true
    }

    @inline(never)
    final func syncSlow(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                        barrier: Bool, caller: StaticString) {
        checkSyncDeadlock(barrier: barrier, caller: caller)
        withUnsafeTemporaryAllocation(of: gc_continuation_t.self, capacity: 1) { buffer in
            let node = buffer.baseAddress!
            var flags: ContinuationFlags = .syncWaiter
            if barrier { flags.insert(.barrier) }
            node.initialize(to: gc_continuation_t(next: nil, function: function, context: context,
                                                  flags: flags.rawValue, group: nil, owner: nil,
                                                  waiter: nil, waiter_word: 0))
            let word = UnsafeMutableRawPointer(node).advanced(by: MemoryLayout<gc_continuation_t>.offset(of: \.waiter_word)!)
            node.pointee.waiter = word
            let w = word.assumingMemoryBound(to: UInt32.self)
            push(node)
            BlockingRegion.enter()
            while gc_word_load(w) == 0 { _ = gc_futex_wait(w, 0, -1) }
            BlockingRegion.leave()
        }
    }

    /// A sync that must wait for a queue this thread is itself inside of would wait
    /// forever: report it, as libdispatch does. Along the target chain: a queue the sync
    /// needs exclusively (serial, or the barrier's own queue) must not be held by this
    /// thread at all; one it needs a unit of width of must not be held exclusively (a
    /// barrier or the drain of that queue). The main queue belongs to the main thread.
    ///
    /// Not caught (libdispatch does not either): a cycle through another thread, where the
    /// function of a sync that had to wait runs on the drainer's thread and syncs back
    /// onto a queue the first thread holds.
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

/// The main thread's kernel id is the process id. Asked each time rather than cached, so
/// the answer stays right in a forked child.
@inline(__always)
func isMainThread() -> Bool { gc_thread_id() == Int32(getpid()) }
