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

    /// Returns true when this woke a waiting thread.
    @inline(__always)
    func signalSemaphore() -> Bool { semaphore.signal() }

    /// Returns true when the semaphore was taken, false on timeout.
    @inline(__always)
    func waitSemaphore(timeoutNanoseconds: Int64) -> Bool {
        if semaphore.value.load(ordering: .relaxed) > 0 || timeoutNanoseconds == 0 {
            return semaphore.wait(timeoutNanoseconds: timeoutNanoseconds)
        }
        BlockingRegion.enter()
        defer { BlockingRegion.leave() }
        return semaphore.wait(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// `semaphore[0x…] = { refcount, value, waiters, initial }`: the counter goes negative
    /// by one per waiter (FutexSemaphore), shown as a value of 0 and that many waiters.
    override func debugDescription() -> String {
        let v = semaphore.value.load(ordering: .relaxed)
        return describe([("refcount", debugRefcount), ("value", "\(max(v, 0))"), ("waiters", "\(max(-v, 0))"),
                         ("initial", "\(initialValue)")])
    }
}
