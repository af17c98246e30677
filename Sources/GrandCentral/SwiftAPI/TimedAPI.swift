// The parts of the Swift API that take DispatchTime / DispatchWallTime.

extension DispatchQueue {
    /// Submits `work` to run on this queue at `deadline` (uptime clock), never earlier.
    public func asyncAfter(deadline: DispatchTime, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                           execute work: @escaping @Sendable () -> Void) {
        // Never (distantFuture): nothing to retain, as libdispatch.
        if deadline.rawValue == ~0 { return }
        after(deadline.rawValue, closureBoxTrampoline, ClosureBox.retainedContext(work),
              flags.contains(.barrier) ? .barrier : [])
    }

    /// Submits `work` to run on this queue at `wallDeadline` (wall clock), never earlier.
    public func asyncAfter(wallDeadline: DispatchWallTime, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                           execute work: @escaping @Sendable () -> Void) {
        // Never (distantFuture): nothing to retain, as libdispatch.
        if wallDeadline.rawValue == ~0 { return }
        after(wallDeadline.rawValue, closureBoxTrampoline, ClosureBox.retainedContext(work),
              flags.contains(.barrier) ? .barrier : [])
    }

    /// Submits `workItem` to run on this queue at `deadline` (uptime clock).
    public func asyncAfter(deadline: DispatchTime, execute workItem: DispatchWorkItem) {
        // Never (distantFuture): nothing to retain, as libdispatch.
        if deadline.rawValue == ~0 { return }
        after(deadline.rawValue, workItemTrampoline, Unmanaged.passRetained(workItem).toOpaque(),
              workItem.flags.contains(.barrier) ? .barrier : [])
    }

    /// Submits `workItem` to run on this queue at `wallDeadline` (wall clock).
    public func asyncAfter(wallDeadline: DispatchWallTime, execute workItem: DispatchWorkItem) {
        // Never (distantFuture): nothing to retain, as libdispatch.
        if wallDeadline.rawValue == ~0 { return }
        after(wallDeadline.rawValue, workItemTrampoline, Unmanaged.passRetained(workItem).toOpaque(),
              workItem.flags.contains(.barrier) ? .barrier : [])
    }
}

extension DispatchGroup {
    /// Waits until everything has finished, or until `timeout` (uptime clock) passes.
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }

    /// Waits until everything has finished, or until the wall-clock timeout passes.
    public func wait(wallTimeout timeout: DispatchWallTime) -> DispatchTimeoutResult {
        wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }
}

extension DispatchSemaphore {
    /// Decrements the semaphore, waiting for a signal until `timeout` (uptime clock) at most.
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        waitSemaphore(deadline: timeout.rawValue) ? .success : .timedOut
    }

    /// Decrements the semaphore, waiting for a signal until the wall-clock timeout at most.
    public func wait(wallTimeout: DispatchWallTime) -> DispatchTimeoutResult {
        waitSemaphore(deadline: wallTimeout.rawValue) ? .success : .timedOut
    }
}

extension DispatchWorkItem {
    /// Waits until everything has finished, or until `timeout` (uptime clock) passes.
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        waitNanoseconds(DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }

    /// Waits until everything has finished, or until the wall-clock timeout passes.
    public func wait(wallTimeout: DispatchWallTime) -> DispatchTimeoutResult {
        waitNanoseconds(DispatchClock.nanosecondsUntil(wallTimeout.rawValue)) ? .success : .timedOut
    }
}
