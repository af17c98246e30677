import CGrandCentral
import Synchronization

/// A counting semaphore on a futex: the primitive under `dispatch_semaphore_t`. (The
/// thread pool's idle workers sleep in `ParkedWorkers`, which wakes the newest first.)
///
/// Contract (after libdispatch's semaphore and Go's sema): `value` may go negative, and
/// then counts waiters. Every `signal` that finds a waiter grants exactly one wakeup
/// through `grants`, the futex word, even when it happens before the waiter sleeps; a
/// waiter that times out either takes its unit of `value` back or, if a signal already
/// granted it a wakeup, consumes that grant instead, so no signal is lost or counted twice.
///
/// A non-copyable struct, so that its counter lives inline in its owner (a
/// `DispatchSemaphore`): the uncontended signal and wait touch the owner's own
/// memory, with no pointer to chase to a second object.
struct FutexSemaphore: ~Copyable, @unchecked Sendable {
    let value: Atomic<Int>
    /// Wakeups granted to waiters and not yet consumed; the futex word (own allocation,
    /// so its address is stable). Touched only through gc_word_* atomics.
    let grants: UnsafeMutablePointer<UInt32>

    init(value: Int) {
        self.value = Atomic(value)
        grants = .allocate(capacity: 1)
        grants.initialize(to: 0)
    }

    deinit { grants.deallocate() }

    /// Returns true when it woke (granted a wakeup to) a waiter.
    @inline(__always)
    func signal() -> Bool {
        if addUnitFindingNoWaiter() { return false }
        Self.grantWakeup(grants)
        return true
    }

    /// The first half of `signal`, for a caller that finishes it its own way: adds the
    /// unit; true when nobody waited (done), false when a waiter is owed `grantWakeup`.
    @inline(__always)
    func addUnitFindingNoWaiter() -> Bool {
        // acquiringAndReleasing: a signal publishes the signaller's writes to the waiter.
        value.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue >= 0
    }

    /// `signal` found a waiter: one grant and one futex wake. Out of line and static (the
    /// futex word its only argument), so the uncontended signal saves no register and
    /// keeps no frame.
    @inline(never)
    static func grantWakeup(_ grants: UnsafeMutablePointer<UInt32>) {
        _ = gc_word_add(grants, 1)
        gc_futex_wake(grants, 1)
    }

    /// Returns true when it got the semaphore, false on timeout. `timeoutNanoseconds < 0`
    /// waits forever.
    @inline(__always)
    func wait(timeoutNanoseconds: Int64) -> Bool {
        let old = value.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue
        if old > 0 { return true }
        return waitSlow(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// The first half of `wait`, for a caller that decides how to wait only when it must
    /// (`DispatchSemaphore`: the deadline is decoded and the pool told of the block on the
    /// slow path only). Returns true when it took a unit; false when the caller is now
    /// counted as a waiter and must finish with `waitSlow`, which takes the unit back on
    /// timeout.
    @inline(__always)
    func takeOrJoinWaiters() -> Bool {
        value.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue > 0
    }

    @inline(never)
    func waitSlow(timeoutNanoseconds: Int64) -> Bool {
        let start = timeoutNanoseconds > 0 ? gc_uptime_ns() : 0
        var forever = timeoutNanoseconds < 0
        while true {
            if consumeGrant() { return true }
            var remaining: Int64 = -1
            if !forever {
                remaining = timeoutNanoseconds == 0 ? 0 : timeoutNanoseconds - Int64(gc_uptime_ns() &- start)
                if remaining <= 0 {
                    // Time is up: take back our unit, unless a signal granted us a wakeup.
                    var v = value.load(ordering: .relaxed)
                    while v < 0 {
                        let (done, now) = value.weakCompareExchange(expected: v, desired: v + 1, ordering: .relaxed)
                        if done { return false }
                        v = now
                    }
                    forever = true  // a grant is on its way; wait for it
                    continue
                }
            }
            _ = gc_futex_wait(grants, 0, remaining)
        }
    }

    @inline(__always)
    private func consumeGrant() -> Bool {
        var g = gc_word_load(grants)
        while g > 0 {
            if gc_word_cas(grants, g, g - 1) { return true }
            g = gc_word_load(grants)
        }
        return false
    }
}
