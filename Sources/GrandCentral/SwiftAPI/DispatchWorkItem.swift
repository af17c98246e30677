import Synchronization

/// A unit of work that can be performed, waited for, observed and cancelled, spelled like
/// Swift's Dispatch.
///
/// Completion is a private group entered when the item is made and left the first time
/// the item finishes (or, if cancelled, the first time it is dequeued), so `wait` and
/// `notify` behave like `dispatch_block_wait`/`dispatch_block_notify`. `state` bits:
/// 1 cancelled, 2 finished once. Any thread.
public final class DispatchWorkItem: @unchecked Sendable {
    let body: () -> Void
    let flags: DispatchWorkItemFlags
    let qos: DispatchQoS
    private let state = Atomic<UInt8>(0)
    private let completion = DispatchGroup()

    /// A work item that runs `block` (unless cancelled first) with `flags`.
    public init(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], block: @escaping () -> Void) {
        self.body = block
        self.flags = flags
        self.qos = qos
        completion.enter()
    }

    /// An item that goes away without having run completes then (as a released
    /// `dispatch_block_create` block does in libdispatch): its notifications run and its
    /// completion group is balanced, so nothing leaks.
    deinit { finish() }

    /// Runs the item on the current thread (unless it was cancelled before it started).
    public func perform() {
        if state.load(ordering: .acquiring) & 1 == 0 { body() }
        finish()
    }

    private func finish() {
        if state.bitwiseOr(2, ordering: .acquiringAndReleasing).oldValue & 2 == 0 {
            completion.leave()
        }
    }

    /// Waits until the item has finished.
    public func wait() { _ = completion.wait(timeoutNanoseconds: -1) }

    /// Runs `execute` on `queue` when the item has finished.
    public func notify(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], queue: DispatchQueue,
                       execute: @escaping () -> Void) {
        completion.notify(queue: queue, function: closureBoxTrampoline, context: ClosureBox.retainedContext(execute),
                          flags: flags.contains(.barrier) ? .barrier : [])
    }

    /// Runs `workItem` on `queue` when this item has finished.
    public func notify(queue: DispatchQueue, execute workItem: DispatchWorkItem) {
        completion.notify(queue: queue, function: workItemTrampoline, context: Unmanaged.passRetained(workItem).toOpaque(),
                          flags: workItem.flags.contains(.barrier) ? .barrier : [])
    }

    /// Keeps the item from starting if it has not yet; a running item is not interrupted.
    public func cancel() { state.bitwiseOr(1, ordering: .acquiringAndReleasing) }

    /// Whether `cancel()` has been called.
    public var isCancelled: Bool { state.load(ordering: .acquiring) & 1 != 0 }

    func waitNanoseconds(_ timeout: Int64) -> Bool { completion.wait(timeoutNanoseconds: timeout) }
}

/// Runs a retained DispatchWorkItem context.
let workItemTrampoline: DispatchFunction = { context in
    Unmanaged<DispatchWorkItem>.fromOpaque(context!).takeRetainedValue().perform()
}
