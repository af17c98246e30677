import CGrandCentral

// The Swift face of DispatchQueue, spelled like Swift's Dispatch. It calls the engine
// directly; closures travel as retained ClosureBox contexts.

extension DispatchQueue {
    public struct Attributes: OptionSet, Sendable {
        public let rawValue: UInt64
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public static let concurrent = Attributes(rawValue: 1 << 1)
        public static let initiallyInactive = Attributes(rawValue: 1 << 2)
    }

    public enum AutoreleaseFrequency: Sendable {
        case inherit, workItem, never
    }

    public convenience init(label: String, qos: DispatchQoS = .unspecified, attributes: Attributes = [],
                            autoreleaseFrequency: AutoreleaseFrequency = .inherit, target: DispatchQueue? = nil) {
        var a = attributes.contains(.concurrent) ? QueueAttributes.concurrent : QueueAttributes.serial
        a.isInitiallyInactive = attributes.contains(.initiallyInactive)
        a.qos = qos.qosClass.level
        a.relativePriority = Int32(max(-15, min(0, qos.relativePriority)))
        switch autoreleaseFrequency {
        case .inherit: a.autoreleaseFrequency = 0
        case .workItem: a.autoreleaseFrequency = 1
        case .never: a.autoreleaseFrequency = 2
        }
        let resolvedTarget = target ?? RootQueues.queue(qos: a.qos, overcommit: !a.isConcurrent)
        self.init(role: a.isConcurrent ? .concurrent : .serial, label: label, attributes: a, target: resolvedTarget)
    }

    /// The global concurrent queue for a QoS class.
    public class func global(qos: DispatchQoS.QoSClass = .default) -> DispatchQueue {
        RootQueues.queue(qos: qos.level, overcommit: false)
    }

    public var label: String { labelString }

    public var qos: DispatchQoS {
        DispatchQoS(qosClass: DispatchQoS.QoSClass(level: qosLevel), relativePriority: Int(relativePriority))
    }

    // MARK: Async

    public func async(group: DispatchGroup? = nil, qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                      execute work: @escaping @Sendable () -> Void) {
        submit(closureBoxTrampoline, ClosureBox.retainedContext(work), group: group, barrier: flags.contains(.barrier))
    }

    public func async(execute workItem: DispatchWorkItem) {
        async(group: nil, execute: workItem)
    }

    public func async(group: DispatchGroup?, execute workItem: DispatchWorkItem) {
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
            node.pointee.group = Unmanaged.passUnretained(group).toOpaque()
            push(node)
        } else {
            enqueue(function, context, flags)
        }
    }

    // MARK: Sync

    private func syncVoid(barrier: Bool, _ body: () -> Void) {
        withoutActuallyEscaping(body) { escapable in
            var thunk: () -> Void = escapable
            withUnsafeMutablePointer(to: &thunk) { pointer in
                self.sync(thunkTrampoline, UnsafeMutableRawPointer(pointer), barrier: barrier, caller: "DispatchQueue.sync")
            }
        }
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

    public func sync(execute workItem: DispatchWorkItem) {
        syncVoid(barrier: workItem.flags.contains(.barrier)) { workItem.perform() }
    }

    public func sync<T>(execute work: () throws -> T) rethrows -> T {
        try syncHelper(barrier: false, execute: work, rescue: { throw $0 })
    }

    public func sync<T>(flags: DispatchWorkItemFlags, execute work: () throws -> T) rethrows -> T {
        try syncHelper(barrier: flags.contains(.barrier), execute: work, rescue: { throw $0 })
    }

    public func asyncAndWait(execute workItem: DispatchWorkItem) { sync(execute: workItem) }

    public func asyncAndWait<T>(flags: DispatchWorkItemFlags = [], execute work: () throws -> T) rethrows -> T {
        try syncHelper(barrier: flags.contains(.barrier), execute: work, rescue: { throw $0 })
    }

    // MARK: Apply

    /// Runs `work` for every index in 0..<iterations, in parallel, and returns when all are done.
    public class func concurrentPerform(iterations: Int, execute work: (Int) -> Void) {
        withoutActuallyEscaping(work) { escapable in
            var thunk: (Int) -> Void = escapable
            withUnsafeMutablePointer(to: &thunk) { pointer in
                let queue = HeldQueues.current.flatMap { $0.isSerial ? nil : $0 } ?? RootQueues.defaultQueue
                queue.apply(iterations: iterations, context: UnsafeMutableRawPointer(pointer), work: indexThunkTrampoline)
            }
        }
    }

    // MARK: Specific data

    public func setSpecific<T>(key: DispatchSpecificKey<T>, value: T?) {
        let keyPointer = UnsafeRawPointer(Unmanaged.passUnretained(key).toOpaque())
        if let value {
            let box = Unmanaged.passRetained(SpecificBox(value)).toOpaque()
            setSpecific(key: keyPointer, context: box, destructor: specificBoxRelease)
        } else {
            setSpecific(key: keyPointer, context: nil, destructor: nil)
        }
    }

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

private let thunkTrampoline: DispatchFunction = { context in
    context!.assumingMemoryBound(to: (() -> Void).self).pointee()
}

private let indexThunkTrampoline: @convention(c) (UnsafeMutableRawPointer?, Int) -> Void = { context, index in
    context!.assumingMemoryBound(to: ((Int) -> Void).self).pointee(index)
}

/// A key for `setSpecific`/`getSpecific`: compared by identity.
public final class DispatchSpecificKey<T>: @unchecked Sendable {
    public init() {}
}

final class SpecificBox<T> {
    let value: T
    init(_ value: T) { self.value = value }
}

private let specificBoxRelease: DispatchFunction = { context in
    Unmanaged<AnyObject>.fromOpaque(context!).release()
}

// MARK: - Preconditions

public enum DispatchPredicate: Sendable {
    case onQueue(DispatchQueue)
    case onQueueAsBarrier(DispatchQueue)
    case notOnQueue(DispatchQueue)
}

/// Traps (with a BUG IN CLIENT line) unless `condition` holds.
public func dispatchPrecondition(condition: @autoclosure () -> DispatchPredicate) {
    switch condition() {
    case .onQueue(let q):
        if !q.isCurrent() { clientBug("dispatchPrecondition", "block was expected to execute on the given queue") }
    case .onQueueAsBarrier(let q):
        if !q.isCurrentAsBarrier() { clientBug("dispatchPrecondition", "block was expected to act as a barrier on the given queue") }
    case .notOnQueue(let q):
        if q.isCurrent() { clientBug("dispatchPrecondition", "block was expected not to execute on the given queue") }
    }
}

// MARK: - Groups and semaphores

extension DispatchGroup {
    /// Waits until every entered item has left.
    public func wait() { _ = wait(timeoutNanoseconds: -1) }

    public func notify(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [], queue: DispatchQueue,
                       execute work: @escaping @Sendable () -> Void) {
        notify(queue: queue, function: closureBoxTrampoline, context: ClosureBox.retainedContext(work),
               flags: flags.contains(.barrier) ? .barrier : [])
    }

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
    public func signal() -> Int { signalSemaphore() ? 1 : 0 }
}
