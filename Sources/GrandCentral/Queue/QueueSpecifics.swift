import CGrandCentral

/// `dispatch_queue_set_specific` storage: a short array of (key, context, destructor) held
/// by the queue itself (`DispatchQueue.specifics`, guarded by its `specificsLock`). Keys
/// are compared by address and never dereferenced. A replaced or removed context's
/// destructor runs asynchronously on the default root queue, as in libdispatch. The array
/// is the queue's field, not a separate object holding one: a queue with one key costs one
/// allocation (the array's buffer), and a queue with none costs nothing (the empty array
/// is static).
enum QueueSpecifics {
    struct Entry {
        var key: UnsafeRawPointer
        var context: UnsafeMutableRawPointer?
        var destructor: DispatchFunction?
    }

    /// Hands every destructor its context, on the default root queue (the queue is gone).
    static func destroyAll(_ entries: [Entry]) {
        for entry in entries {
            if let destructor = entry.destructor, entry.context != nil {
                DispatchQueue.defaultRootQueue.enqueue(destructor, entry.context)
            }
        }
    }
}

extension DispatchQueue {
    final func setSpecific(key: UnsafeRawPointer, context: UnsafeMutableRawPointer?, destructor: DispatchFunction?) {
        var replaced: QueueSpecifics.Entry?
        specificsLock.withLock {
            if let index = specifics.firstIndex(where: { $0.key == key }) {
                replaced = specifics[index]
                if context == nil {
                    specifics.remove(at: index)
                } else {
                    specifics[index] = .init(key: key, context: context, destructor: destructor)
                }
            } else if context != nil {
                specifics.append(.init(key: key, context: context, destructor: destructor))
            }
        }
        if let old = replaced, let destructor = old.destructor, old.context != nil {
            DispatchQueue.defaultRootQueue.enqueue(destructor, old.context)
        }
    }

    /// The context for `key` on this queue alone.
    final func getSpecific(key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        specificsLock.withLock {
            specifics.first(where: { $0.key == key })?.context
        }
    }

    /// `dispatch_get_specific`: the current queue's context for `key`, else its target's,
    /// and so on up to the root.
    static func currentSpecific(key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        var queue = DispatchQueue.currentQueue
        while let q = queue {
            if let value = q.getSpecific(key: key) { return value }
            queue = q.targetQueue
        }
        return nil
    }

    /// The queue the caller runs on: the innermost queue it is inside of; on the main thread
    /// outside any queue, the main queue; otherwise the default root queue.
    static var currentQueue: DispatchQueue? {
        if let held = HeldQueues.current { return held }
        if isMainThread() { return DispatchQueue.main }
        return gc_thread_self().pointee.worker != nil ? RootQueues.defaultQueue : nil
    }

    /// `dispatch_assert_queue`: true when the caller runs on this queue or on a queue that
    /// targets it (directly or through others). The main queue is bound to the main thread:
    /// code on the main thread is on it, also inside a sync onto another queue.
    final func isCurrent() -> Bool {
        if role == .main && isMainThread() { return true }
        return HeldQueues.contains { held, _ in
            var q: DispatchQueue? = held
            while let candidate = q {
                if candidate === self { return true }
                q = candidate.targetQueue
            }
            return false
        }
    }

    /// `dispatch_assert_queue_barrier`: on this queue, and nothing else of it is running.
    final func isCurrentAsBarrier() -> Bool {
        guard isCurrent() else { return false }
        if isSerial { return true }
        let s = QueueState(state.load(ordering: .acquiring))
        return s.inFlight == 0 && s.isEnqueued
    }
}
