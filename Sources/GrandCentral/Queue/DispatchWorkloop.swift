import Synchronization

/// A workloop (libdispatch's private `dispatch_workloop_t`): a serial queue that is a
/// context of its own — not a thread, but the one place its items and the items of the
/// queues that target it are run, one at a time — and that may be a target like any queue.
///
/// Order. libdispatch defines a workloop as running its items in priority order (the QoS of
/// each submission), re-evaluated between items. On Linux it has no kernel workloops and its
/// workloops run items in submission order (observed with the toolchain's library: items
/// submitted with QoS background, user-interactive, default, ... ran first to last). A
/// GrandCentral workloop does the same: it is a serial queue, FIFO; its items carry no QoS
/// of their own to order by (GrandCentral records a block's QoS but does not apply it).
///
/// What differs from a serial queue: `dispatch_workloop_is_current` and
/// `dispatch_workloop_copy_current` find it from the items it runs (directly or through a
/// queue that targets it), where libdispatch on Linux always answers false and NULL; and
/// the properties below, settable while inactive, which are recorded and have no effect
/// (autorelease pools do not exist on Linux; a CPU percentage needs a kernel scheduler
/// feature Linux does not have).
final class DispatchWorkloop: DispatchQueue, @unchecked Sendable {
    /// dispatch_workloop_set_autorelease_frequency's value. Written while inactive only.
    var autoreleaseFrequency: UInt = 0
    /// dispatch_workloop_set_cpupercent's values. Written while inactive only.
    var cpuPercent: (percent: UInt8, refillMilliseconds: UInt32) = (0, 0)

    /// `dispatch_workloop_create(_inactive)`: targets the overcommit root queue of the
    /// default QoS, as a serial queue does.
    static func make(label: UnsafePointer<CChar>?, inactive: Bool) -> DispatchWorkloop {
        var attributes = QueueAttributes.serial
        attributes.isInitiallyInactive = inactive
        return DispatchWorkloop(role: .serial, label: label, attributes: attributes,
                                target: RootQueues.queue(qos: .default, overcommit: true))
    }

    /// The innermost workloop the calling thread is running items of, or nil.
    static var current: DispatchWorkloop? {
        var found: DispatchWorkloop?
        _ = HeldQueues.contains { held, _ in
            var q: DispatchQueue? = held
            while let candidate = q {
                if let workloop = candidate as? DispatchWorkloop { found = workloop; return true }
                q = candidate.targetQueue
            }
            return false
        }
        return found
    }
}

extension DispatchQueue {
    var isInactiveQueue: Bool { QueueState(state.load(ordering: .acquiring)).isInactive }

    /// `dispatch_set_qos_class` / `_floor` and the workloop setters: the QoS the queue
    /// reports from now on; a queue still targeting a root queue moves to the root of that
    /// QoS (same overcommit). Only while inactive (the caller checks).
    func setQoSWhileInactive(_ qos: QoSLevel, relativePriority: Int32, caller: StaticString) {
        qosLevel = qos
        self.relativePriority = qos == .unspecified ? 0 : relativePriority
        if let target = targetQueue, target.role == .root {
            let overcommit = (target as? RootQueue)?.overcommit ?? false
            setTargetQueue(RootQueues.queue(qos: qos, overcommit: overcommit), caller: caller)
        }
    }
}
