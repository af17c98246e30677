// The parts of the Swift API that take DispatchTime / DispatchWallTime.

extension DispatchQueue {
    public func asyncAfter(deadline: DispatchTime, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                           execute work: @escaping @Sendable () -> Void) {
        after(deadline.rawValue, closureBoxTrampoline, ClosureBox.retainedContext(work),
              flags.contains(.barrier) ? .barrier : [])
    }

    public func asyncAfter(wallDeadline: DispatchWallTime, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                           execute work: @escaping @Sendable () -> Void) {
        after(wallDeadline.rawValue, closureBoxTrampoline, ClosureBox.retainedContext(work),
              flags.contains(.barrier) ? .barrier : [])
    }

    public func asyncAfter(deadline: DispatchTime, execute workItem: DispatchWorkItem) {
        after(deadline.rawValue, workItemTrampoline, Unmanaged.passRetained(workItem).toOpaque(),
              workItem.flags.contains(.barrier) ? .barrier : [])
    }

    public func asyncAfter(wallDeadline: DispatchWallTime, execute workItem: DispatchWorkItem) {
        after(wallDeadline.rawValue, workItemTrampoline, Unmanaged.passRetained(workItem).toOpaque(),
              workItem.flags.contains(.barrier) ? .barrier : [])
    }
}

extension DispatchGroup {
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }

    public func wait(wallTimeout timeout: DispatchWallTime) -> DispatchTimeoutResult {
        wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }
}

extension DispatchSemaphore {
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        waitSemaphore(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }

    public func wait(wallTimeout: DispatchWallTime) -> DispatchTimeoutResult {
        waitSemaphore(timeoutNanoseconds: DispatchClock.nanosecondsUntil(wallTimeout.rawValue)) ? .success : .timedOut
    }
}

extension DispatchWorkItem {
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        waitNanoseconds(DispatchClock.nanosecondsUntil(timeout.rawValue)) ? .success : .timedOut
    }

    public func wait(wallTimeout: DispatchWallTime) -> DispatchTimeoutResult {
        waitNanoseconds(DispatchClock.nanosecondsUntil(wallTimeout.rawValue)) ? .success : .timedOut
    }
}
