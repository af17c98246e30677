import CGrandCentral

/// A counting semaphore (`dispatch_semaphore_t`), on `FutexSemaphore`. Disposing of one
/// whose value is below the value it was created with means someone still waits, or a
/// wait was never balanced: libdispatch crashes, and so do we.
public final class DispatchSemaphore: DispatchObject, @unchecked Sendable {
    let semaphore: FutexSemaphore
    let initialValue: Int

    /// A semaphore that starts at `value` (0 to signal events, n to guard n resources).
    public init(value: Int) {
        if value < 0 { clientBug("DispatchSemaphore.init", "negative initial value") }
        semaphore = FutexSemaphore(value: value)
        initialValue = value
        super.init(kind: .semaphore)
    }

    /// For the C API, which returns NULL instead of trapping on a negative value.
    init(validatedValue value: Int) {
        semaphore = FutexSemaphore(value: value)
        initialValue = value
        super.init(kind: .semaphore)
    }

    deinit {
        if semaphore.value.load(ordering: .acquiring) < initialValue {
            clientBug("dispatch_release", "semaphore object deallocated while in use (current value < original value)")
        }
    }

    /// 1 when this woke a waiting thread, else 0 (`dispatch_semaphore_signal`'s and
    /// `signal()`'s result). The uncontended path is the atomic increment; the wake is a
    /// tail call, so the C entry point keeps no frame.
    @inline(__always)
    func signalSemaphore() -> Int {
        if semaphore.addUnitFindingNoWaiter() { return 0 }
        return Self.wakeWaiter(self)
    }

    @inline(never)
    static func wakeWaiter(_ semaphore: DispatchSemaphore) -> Int {
        FutexSemaphore.grantWakeup(semaphore.semaphore.grants)
        return 1
    }

    /// `dispatch_semaphore_wait`: true when the semaphore was taken, false when `deadline`
    /// (a `dispatch_time_t`) passed first. The uncontended path is one atomic decrement, as
    /// libdispatch's: the deadline is decoded only when the semaphore has to wait.
    @inline(__always)
    func waitSemaphore(deadline: UInt64) -> Bool {
        if semaphore.takeOrJoinWaiters() { return true }
        return Self.waitAsWaiter(self, deadline: deadline)
    }

    /// Static, the semaphore an ordinary argument: a method would take it in the
    /// self register, which the C entry point would then save and restore on every call.
    @inline(never)
    static func waitAsWaiter(_ semaphore: DispatchSemaphore, deadline: UInt64) -> Bool {
        semaphore.waitAsWaiter(timeoutNanoseconds: DispatchClock.nanosecondsUntil(deadline))
    }

    /// `waitSemaphore(deadline:)` as `dispatch_semaphore_wait` answers: 0 when the
    /// semaphore was taken, 1 when `deadline` passed first. The slow path is a tail call
    /// that already answers so, so the C entry point keeps no frame.
    @inline(__always)
    func waitSemaphoreStatus(deadline: UInt64) -> Int {
        if semaphore.takeOrJoinWaiters() { return 0 }
        return Self.waitAsWaiterStatus(self, deadline: deadline)
    }

    @inline(never)
    static func waitAsWaiterStatus(_ semaphore: DispatchSemaphore, deadline: UInt64) -> Int {
        waitAsWaiter(semaphore, deadline: deadline) ? 0 : 1
    }

    /// True when the semaphore was taken, false on timeout (`timeoutNanoseconds < 0`:
    /// never times out).
    @inline(__always)
    func waitSemaphore(timeoutNanoseconds: Int64) -> Bool {
        if semaphore.takeOrJoinWaiters() { return true }
        return waitAsWaiter(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// The decrement found no unit: this thread is counted as a waiter. A zero timeout
    /// gives its unit back at once without telling the pool; any other wait may block.
    @inline(never)
    func waitAsWaiter(timeoutNanoseconds: Int64) -> Bool {
        if timeoutNanoseconds == 0 { return semaphore.waitSlow(timeoutNanoseconds: 0) }
        BlockingRegion.enter()
        defer { BlockingRegion.leave() }
        return semaphore.waitSlow(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// `semaphore[0x…] = { refcount, value, waiters, initial }`: the counter goes negative
    /// by one per waiter (FutexSemaphore), shown as a value of 0 and that many waiters.
    override func debugDescription() -> String {
        let v = semaphore.value.load(ordering: .relaxed)
        return describe([("refcount", debugRefcount), ("value", "\(max(v, 0))"), ("waiters", "\(max(-v, 0))"),
                         ("initial", "\(initialValue)")])
    }
}
