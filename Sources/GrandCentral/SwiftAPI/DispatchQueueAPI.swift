import CGrandCentral

// The Swift face of DispatchQueue, spelled like Swift's Dispatch. It calls the engine
// directly; closures travel as retained ClosureBox contexts.

extension DispatchQueue {
    /// Attributes of a new queue: concurrent, initially inactive.
    public struct Attributes: OptionSet, Sendable {
        /// The attribute bits.
        public let rawValue: UInt64
        /// Attributes from their bits.
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        /// Items may run at the same time.
        public static let concurrent = Attributes(rawValue: 1 << 1)
        /// Nothing runs until `activate()`.
        public static let initiallyInactive = Attributes(rawValue: 1 << 2)
    }

    /// Accepted for source compatibility; Linux has no autorelease pools.
    public enum AutoreleaseFrequency: Sendable {
        case inherit, workItem, never
    }

    /// A new queue with a label, QoS, attributes and target (a root queue if `nil`).
    public convenience init(label: String, qos: DispatchQoS = .unspecified, attributes: Attributes = [],
                            autoreleaseFrequency: AutoreleaseFrequency = .inherit, target: DispatchQueue? = nil) {
        let a = Self.queueAttributes(qos: qos, attributes: attributes, autoreleaseFrequency: autoreleaseFrequency)
        let resolvedTarget = target ?? RootQueues.queue(qos: a.qos, overcommit: !a.isConcurrent)
        self.init(role: a.isConcurrent ? .concurrent : .serial, label: label, attributes: a, target: resolvedTarget)
    }

    /// The engine's attributes for the Swift initializers' arguments.
    static func queueAttributes(qos: DispatchQoS, attributes: Attributes,
                                autoreleaseFrequency: AutoreleaseFrequency) -> QueueAttributes {
        var a = attributes.contains(.concurrent) ? QueueAttributes.concurrent : QueueAttributes.serial
        a.isInitiallyInactive = attributes.contains(.initiallyInactive)
        a.qos = qos.qosClass.level
        a.relativePriority = Int32(max(-15, min(0, qos.relativePriority)))
        switch autoreleaseFrequency {
        case .inherit: a.autoreleaseFrequency = 0
        case .workItem: a.autoreleaseFrequency = 1
        case .never: a.autoreleaseFrequency = 2
        }
        return a
    }

    /// The global concurrent queue for a QoS class.
    public class func global(qos: DispatchQoS.QoSClass = .default) -> DispatchQueue {
        RootQueues.queue(qos: qos.level, overcommit: false)
    }

    /// The pre-QoS priorities of the global queues (`DISPATCH_QUEUE_PRIORITY_*`).
    @available(macOS, deprecated: 10.10, message: "Use qos attributes instead")
    @available(iOS, deprecated: 8.0, message: "Use qos attributes instead")
    @available(tvOS, deprecated, message: "Use qos attributes instead")
    @available(watchOS, deprecated, message: "Use qos attributes instead")
    public enum GlobalQueuePriority {
        /// `DISPATCH_QUEUE_PRIORITY_HIGH`: the user-initiated global queue.
        @available(macOS, deprecated: 10.10, message: "Use qos attributes instead")
        @available(iOS, deprecated: 8.0, message: "Use qos attributes instead")
        @available(tvOS, deprecated, message: "Use qos attributes instead")
        @available(watchOS, deprecated, message: "Use qos attributes instead")
        case high
        /// `DISPATCH_QUEUE_PRIORITY_DEFAULT`: the default global queue.
        @available(macOS, deprecated: 10.10, message: "Use qos attributes instead")
        @available(iOS, deprecated: 8.0, message: "Use qos attributes instead")
        @available(tvOS, deprecated, message: "Use qos attributes instead")
        @available(watchOS, deprecated, message: "Use qos attributes instead")
        case `default`
        /// `DISPATCH_QUEUE_PRIORITY_LOW`: the utility global queue.
        @available(macOS, deprecated: 10.10, message: "Use qos attributes instead")
        @available(iOS, deprecated: 8.0, message: "Use qos attributes instead")
        @available(tvOS, deprecated, message: "Use qos attributes instead")
        @available(watchOS, deprecated, message: "Use qos attributes instead")
        case low
        /// `DISPATCH_QUEUE_PRIORITY_BACKGROUND`: the background global queue.
        @available(macOS, deprecated: 10.10, message: "Use qos attributes instead")
        @available(iOS, deprecated: 8.0, message: "Use qos attributes instead")
        @available(tvOS, deprecated, message: "Use qos attributes instead")
        @available(watchOS, deprecated, message: "Use qos attributes instead")
        case background

        /// The QoS class libdispatch maps the priority to.
        var level: QoSLevel {
            switch self {
            case .high: return .userInitiated
            case .default: return .default
            case .low: return .utility
            case .background: return .background
            }
        }
    }

    /// The global concurrent queue for a pre-QoS priority.
    @available(macOS, deprecated: 10.10)
    @available(iOS, deprecated: 8.0)
    @available(tvOS, deprecated)
    @available(watchOS, deprecated)
    public class func global(priority: GlobalQueuePriority) -> DispatchQueue {
        RootQueues.queue(qos: priority.level, overcommit: false)
    }

    /// The label given when the queue was made.
    public var label: String { labelString }

    /// The QoS given when the queue was made.
    public var qos: DispatchQoS {
        DispatchQoS(qosClass: DispatchQoS.QoSClass(level: qosLevel), relativePriority: Int(relativePriority))
    }

    // MARK: Async

    /// Submits `work` to run on this queue, as a member of `group` if there is one.
    public func async(group: DispatchGroup? = nil, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                      execute work: @escaping @Sendable () -> Void) {
        submit(closureBoxTrampoline, ClosureBox.retainedContext(work), group: group, barrier: flags.contains(.barrier))
    }

    /// Submits `workItem` to run on this queue.
    public func async(execute workItem: DispatchWorkItem) {
        submit(workItem, group: nil)
    }

    /// Submits `workItem` to run on this queue as a member of `group`.
    public func async(group: DispatchGroup, execute workItem: DispatchWorkItem) {
        submit(workItem, group: group)
    }

    /// Enqueues a retained work item, as a member of `group` if there is one.
    private func submit(_ workItem: DispatchWorkItem, group: DispatchGroup?) {
        submit(workItemTrampoline, Unmanaged.passRetained(workItem).toOpaque(), group: group,
               barrier: workItem.flags.contains(.barrier))
    }

    /// Enqueues `function(context)`, as a member of `group` if there is one.
    private func submit(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer,
                        group: DispatchGroup?, barrier: Bool) {
        let flags: ContinuationFlags = barrier ? .barrier : []
        if let group {
            group.enter()
            let node = ContinuationCache.make(function, context, flags.union(.groupMember))
            // Unretained: the enter above holds the group's self-reference until the node's leave.
            node.pointee.group = Unmanaged.passUnretained(group).toOpaque()
            push(node)
        } else {
            enqueue(function, context, flags)
        }
    }

    // MARK: Sync

    /// The slow path of sync (the fast one runs `body` in place): the closure is lent to
    /// the engine, which may run it on another thread while this one waits (the main
    /// thread, for the main queue); no allocation (NonEscapingClosure.swift).
    private func syncVoid(barrier: Bool, _ body: () -> Void) {
        var request = LentSync(queue: self, barrier: barrier)
        withUnsafeMutablePointer(to: &request) { withLentClosure(body, lentSyncBody, UnsafeMutableRawPointer($0)) }
    }

    /// Runs `fn` through `syncVoid` and carries its result or error back out; the
    /// `rescue` closure rethrows, which lets the public functions be `rethrows`.
    private func syncHelper<T>(barrier: Bool, execute work: () throws -> T,
                               rescue: (any Error) throws -> T) rethrows -> T {
        var result: T?
        var failure: (any Error)?
        syncVoid(barrier: barrier) {
            do { result = try work() } catch { failure = error }
        }
        if let failure { return try rescue(failure) }
        return result!
    }

    /// Performs `workItem` on this queue and returns when it has finished.
    public func sync(execute workItem: DispatchWorkItem) {
        syncVoid(barrier: workItem.flags.contains(.barrier)) { workItem.perform() }
    }

    /// Runs `work` on this queue and returns when it has finished.
    public func sync(execute work: () -> Void) {
        let taken = syncInlineAcquire(barrier: false)
        if taken != .none {
            defer { syncInlineRelease(taken) }
            return HeldQueues.entering(self, exclusive: taken == .exclusive, work)
        }
        syncVoid(barrier: false, work)
    }

    /// Runs `work` on this queue and returns its result, or rethrows its error.
    public func sync<T>(execute work: () throws -> T) rethrows -> T {
        let taken = syncInlineAcquire(barrier: false)
        if taken != .none {
            defer { syncInlineRelease(taken) }
            return try HeldQueues.entering(self, exclusive: taken == .exclusive, work)
        }
        return try syncHelper(barrier: false, execute: work, rescue: { throw $0 })
    }

    /// Runs `work` on this queue (as a barrier if `flags` says so) and returns its result.
    public func sync<T>(flags: DispatchWorkItemFlags, execute work: () throws -> T) rethrows -> T {
        let barrier = flags.contains(.barrier)
        let taken = syncInlineAcquire(barrier: barrier)
        if taken != .none {
            defer { syncInlineRelease(taken) }
            return try HeldQueues.entering(self, exclusive: taken == .exclusive, work)
        }
        return try syncHelper(barrier: barrier, execute: work, rescue: { throw $0 })
    }

    /// Darwin's spelling of `sync(execute:)` for a work item (not in Dispatch on Linux).
    public func asyncAndWait(execute workItem: DispatchWorkItem) { sync(execute: workItem) }

    /// Darwin's spelling of `sync(flags:execute:)` (not in Dispatch on Linux).
    public func asyncAndWait<T>(flags: DispatchWorkItemFlags = [], execute work: () throws -> T) rethrows -> T {
        try syncHelper(barrier: flags.contains(.barrier), execute: work, rescue: { throw $0 })
    }

    // MARK: Apply

    /// Runs `work` for every index in 0..<iterations, in parallel, and returns when all are done.
    public class func concurrentPerform(iterations: Int, execute work: (Int) -> Void) {
        let queue = HeldQueues.current.flatMap { $0.isSerial ? nil : $0 } ?? RootQueues.defaultQueue
        var request = LentApply(queue: queue, iterations: iterations)
        withUnsafeMutablePointer(to: &request) { withLentClosure(work, lentApplyBody, UnsafeMutableRawPointer($0)) }
    }

    // MARK: Specific data

    /// Sets (or, with `nil`, removes) this queue's value for `key`.
    public func setSpecific<T>(key: DispatchSpecificKey<T>, value: T?) {
        let keyPointer = UnsafeRawPointer(Unmanaged.passUnretained(key).toOpaque())
        if let value {
            let box = Unmanaged.passRetained(SpecificBox(value)).toOpaque()
            setSpecific(key: keyPointer, context: box, destructor: specificBoxRelease)
        } else {
            setSpecific(key: keyPointer, context: nil, destructor: nil)
        }
    }

    /// This queue's own value for `key`.
    public func getSpecific<T>(key: DispatchSpecificKey<T>) -> T? {
        let keyPointer = UnsafeRawPointer(Unmanaged.passUnretained(key).toOpaque())
        guard let raw = getSpecific(key: keyPointer) else { return nil }
        return (Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue() as? SpecificBox<T>)?.value
    }

    /// The value for `key` on the current queue or up its target chain.
    public class func getSpecific<T>(key: DispatchSpecificKey<T>) -> T? {
        let keyPointer = UnsafeRawPointer(Unmanaged.passUnretained(key).toOpaque())
        guard let raw = currentSpecific(key: keyPointer) else { return nil }
        return (Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue() as? SpecificBox<T>)?.value
    }
}

/// What syncVoid's lent closure is run with.
private struct LentSync {
    let queue: DispatchQueue
    let barrier: Bool
}

private let lentSyncBody: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { closure, raw in
    let request = raw!.assumingMemoryBound(to: LentSync.self)
    request.pointee.queue.sync(gc_closure_call_void, closure, barrier: request.pointee.barrier, caller: "DispatchQueue.sync")
}

/// What concurrentPerform's lent closure is run with.
private struct LentApply {
    let queue: DispatchQueue
    let iterations: Int
}

/// Runs the iterations; a participant loads the closure once per chunk (`ApplyState.rangeWork`).
private let lentApplyBody: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { closure, raw in
    let request = raw!.assumingMemoryBound(to: LentApply.self)
    request.pointee.queue.apply(iterations: request.pointee.iterations, context: closure,
                                work: gc_closure_call_index, rangeWork: gc_closure_call_range)
}

/// A key for `setSpecific`/`getSpecific`: compared by identity.
public final class DispatchSpecificKey<T> {
    /// A new key, distinct from every other.
    public init() {}
}

/// A key is immutable; it may cross threads when the values it stands for may.
extension DispatchSpecificKey: @unchecked Sendable where T: Sendable {}

final class SpecificBox<T> {
    let value: T
    init(_ value: T) { self.value = value }
}

private let specificBoxRelease: DispatchFunction = { context in
    Unmanaged<AnyObject>.fromOpaque(context!).release()
}

// MARK: - Preconditions

/// What `dispatchPrecondition` checks about the current execution context.
public enum DispatchPredicate: Sendable {
    /// The caller runs on the queue (or on a queue that targets it).
    case onQueue(DispatchQueue)
    /// The caller runs on the queue as a barrier (or the queue is serial).
    case onQueueAsBarrier(DispatchQueue)
    /// The caller does not run on the queue.
    case notOnQueue(DispatchQueue)
}

/// Traps, with a BUG IN CLIENT line naming `file` and `line`, unless `condition` holds.
public func dispatchPrecondition(condition: @autoclosure () -> DispatchPredicate,
                                 file: StaticString = #file, line: UInt = #line) {
    let what: String
    switch condition() {
    case .onQueue(let q):
        if q.isCurrent() { return }
        what = "block was expected to execute on queue [\(q.label)]"
    case .onQueueAsBarrier(let q):
        if q.isCurrentAsBarrier() { return }
        what = "block was expected to act as a barrier on queue [\(q.label)]"
    case .notOnQueue(let q):
        if !q.isCurrent() { return }
        what = "block was expected not to execute on queue [\(q.label)]"
    }
    clientBug("dispatchPrecondition", message: "\(what) (\(file):\(line))")
}

/// Parks the main thread for good and runs the main queue's work on it; never returns.
public func dispatchMain() -> Never {
    MainQueueDriver.run()
}

// MARK: - Groups and semaphores

extension DispatchGroup {
    /// Waits until every entered item has left.
    public func wait() { _ = wait(timeoutNanoseconds: -1) }

    /// Runs `work` on `queue` once every item in the group has left it.
    public func notify(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], queue: DispatchQueue,
                       execute work: @escaping () -> Void) {
        notify(queue: queue, function: closureBoxTrampoline, context: ClosureBox.retainedContext(work),
               flags: flags.contains(.barrier) ? .barrier : [])
    }

    /// Submits `work` to `queue` once every item in the group has left it.
    public func notify(queue: DispatchQueue, work: DispatchWorkItem) {
        notify(queue: queue, function: workItemTrampoline, context: Unmanaged.passRetained(work).toOpaque(),
               flags: work.flags.contains(.barrier) ? .barrier : [])
    }
}

extension DispatchSemaphore {
    /// Decrements the semaphore, waiting as long as needed.
    public func wait() { _ = waitSemaphore(timeoutNanoseconds: -1) }

    /// Increments the semaphore; returns non-zero if that woke a waiting thread.
    @discardableResult
    public func signal() -> Int { signalSemaphore() }
}
