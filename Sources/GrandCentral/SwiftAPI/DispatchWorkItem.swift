/// A unit of work that can be performed, waited for, observed and cancelled, spelled like
/// Swift's Dispatch.
///
/// Everything but the body is the engine's `WorkItemCore` (Runtime/WorkItemCore.swift),
/// the same one `dispatch_block_create`'s blocks use: wait once, cancel, notify and the
/// client-bug rules behave as `dispatch_block_wait`/`_cancel`/`_notify` do. Any thread.
public final class DispatchWorkItem: @unchecked Sendable {
    let body: () -> Void
    let flags: DispatchWorkItemFlags
    let qos: DispatchQoS
    /// Released with the item: one that goes away without having run finishes then (as a
    /// released `dispatch_block_create` block does), so its notifications run.
    private let core = WorkItemCore()

    /// A work item that runs `block` (unless cancelled first) with `flags`.
    public init(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], block: @escaping () -> Void) {
        self.body = block
        self.flags = flags
        self.qos = qos
    }

    /// Runs the item on the current thread (unless it was cancelled before it started).
    public func perform() { core.run(caller: "DispatchWorkItem.perform()", body) }

    /// Waits until the item has finished.
    public func wait() { _ = core.wait(timeoutNanoseconds: -1, caller: "DispatchWorkItem.wait()") }

    /// Runs `execute` on `queue` when the item has finished.
    public func notify(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], queue: DispatchQueue,
                       execute: @escaping () -> Void) {
        core.notify(queue: queue, function: closureBoxTrampoline, context: ClosureBox.retainedContext(execute),
                    flags: flags.contains(.barrier) ? .barrier : [])
    }

    /// Runs `workItem` on `queue` when this item has finished.
    public func notify(queue: DispatchQueue, execute workItem: DispatchWorkItem) {
        core.notify(queue: queue, function: workItemTrampoline, context: Unmanaged.passRetained(workItem).toOpaque(),
                    flags: workItem.flags.contains(.barrier) ? .barrier : [])
    }

    /// Keeps the item from starting if it has not yet; a running item is not interrupted.
    public func cancel() { core.cancel() }

    /// Whether `cancel()` has been called.
    public var isCancelled: Bool { core.isCancelled }

    func waitNanoseconds(_ timeout: Int64) -> Bool {
        core.wait(timeoutNanoseconds: timeout, caller: "DispatchWorkItem.wait(timeout:)")
    }
}

/// Runs a retained DispatchWorkItem context.
let workItemTrampoline: DispatchFunction = { context in
    Unmanaged<DispatchWorkItem>.fromOpaque(context!).takeRetainedValue().perform()
}
