import CGrandCentral
import Glibc
import Synchronization

// The private calls of libdispatch's export list (private.h) that are not data, source or
// workloop calls: queue labels and QoS setters, voucher-era entry points, and the hooks
// libdispatch exports for other runtimes. Where a call is Darwin machinery, the comment
// says what libdispatch does with it on Linux and GrandCentral does the same.

@_cdecl("dispatch_queue_set_label_nocopy")
public func dispatch_queue_set_label_nocopy(_ q: UnsafeMutableRawPointer?, _ label: UnsafePointer<CChar>?) {
    queue(q, "dispatch_queue_set_label_nocopy")._withUnsafeGuaranteedRef { q in
        // As libdispatch on Linux: global queues keep their label; a queue created with a
        // label owns a copy of it and refuses a new one; a queue created without one takes
        // the caller's string as it is (it must outlive the queue).
        if q.role == .root || q.role == .main { return }
        if q.ownedLabel != nil { clientBug("dispatch_queue_set_label_nocopy", "cannot change the label of this queue") }
        q.borrowedLabel.store(label.map { UnsafeMutableRawPointer(mutating: $0) }, ordering: .releasing)
    }
}

/// The queue a QoS setter applies to: an inactive queue (or workloop), else a client bug.
private func inactiveQueue(_ handle: UnsafeMutableRawPointer?, _ caller: StaticString) -> Unmanaged<DispatchQueue> {
    let q = queue(handle, caller)
    if !q._withUnsafeGuaranteedRef({ $0.isInactiveQueue }) {
        clientBug(caller, "the queue must be inactive (created with an inactive attribute, not yet activated)")
    }
    return q
}

private func qosLevel(_ qos: UInt32, _ relativePriority: Int32, _ caller: StaticString) -> QoSLevel {
    guard let level = QoSLevel(rawValue: qos), relativePriority <= 0, relativePriority >= -15 else {
        clientBug(caller, "invalid QoS class or relative priority")
    }
    return level
}

@_cdecl("dispatch_set_qos_class")
public func dispatch_set_qos_class(_ object: UnsafeMutableRawPointer?, _ qos: UInt32, _ relativePriority: Int32) {
    let level = qosLevel(qos, relativePriority, "dispatch_set_qos_class")
    inactiveQueue(object, "dispatch_set_qos_class")._withUnsafeGuaranteedRef {
        $0.setQoSWhileInactive(level, relativePriority: relativePriority, caller: "dispatch_set_qos_class")
    }
}

/// A floor is a QoS the queue's work never runs below. GrandCentral runs a queue's work at
/// its QoS (items carry none of their own), so a floor is the queue's QoS, and
/// dispatch_queue_get_qos_class reports it, as libdispatch's does.
@_cdecl("dispatch_set_qos_class_floor")
public func dispatch_set_qos_class_floor(_ object: UnsafeMutableRawPointer?, _ qos: UInt32, _ relativePriority: Int32) {
    let level = qosLevel(qos, relativePriority, "dispatch_set_qos_class_floor")
    inactiveQueue(object, "dispatch_set_qos_class_floor")._withUnsafeGuaranteedRef {
        $0.setQoSWhileInactive(level, relativePriority: relativePriority, caller: "dispatch_set_qos_class_floor")
    }
}

/// A fallback is the QoS for work submitted without one. Every submission here is without
/// one and runs at the queue's QoS; libdispatch records the fallback without reporting it
/// (dispatch_queue_get_qos_class is unchanged), and so does this: it checks its arguments
/// and changes nothing observable.
@_cdecl("dispatch_set_qos_class_fallback")
public func dispatch_set_qos_class_fallback(_ object: UnsafeMutableRawPointer?, _ qos: UInt32) {
    _ = qosLevel(qos, 0, "dispatch_set_qos_class_fallback")
    _ = inactiveQueue(object, "dispatch_set_qos_class_fallback")
}

/// dispatch_async_f whose item runs at its own QoS rather than the queue's. Items carry no
/// QoS in GrandCentral, so this is dispatch_async_f, called as such (a misuse message names
/// dispatch_async_f). Not a copy of its body with another name in the messages: LLVM's
/// function merging then folds the two into one function that takes the name as extra
/// arguments, and dispatch_async_f becomes a thunk into it that pays for saving them
/// (19 instructions more per call than 6786f20's dispatch_async_f; callgrind).
@_cdecl("dispatch_async_enforce_qos_class_f")
public func dispatch_async_enforce_qos_class_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                                               _ function: dispatch_function_t?) {
    dispatch_async_f(q, context, function)
}

/// A deprecated Darwin call (vouchers): libdispatch's Linux build crashes on it as an
/// unsupported interface, and so does this, with the BUG IN CLIENT line.
@_cdecl("dispatch_queue_create_with_accounting_override_voucher")
public func dispatch_queue_create_with_accounting_override_voucher(_ label: UnsafePointer<CChar>?,
                                                                   _ attr: UnsafeMutableRawPointer?,
                                                                   _ voucher: UnsafeMutableRawPointer?)
    -> UnsafeMutableRawPointer? {
    clientBug("dispatch_queue_create_with_accounting_override_voucher", "unsupported interface")
}

/// Waits until `*slot` is non-NULL and returns it: the consumer's side of a push whose
/// producer has exchanged the list's tail but not yet linked its node. Spins briefly, then
/// yields the processor between looks.
@_cdecl("_dispatch_wait_for_enqueuer")
public func _dispatch_wait_for_enqueuer(_ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?)
    -> UnsafeMutableRawPointer? {
    guard let slot else { clientBug("_dispatch_wait_for_enqueuer", "pointer is NULL") }
    let word = UnsafeMutableRawPointer(slot).assumingMemoryBound(to: UInt.self)
    var spins = 0
    while true {
        // Acquiring: the producer initialised its node before publishing it here.
        let value = gc_uword_load(word)
        if value != 0 { return UnsafeMutableRawPointer(bitPattern: value) }
        spins += 1
        if spins > 128 { sched_yield() }
    }
}

/// libdispatch's I/O tuning knobs (chunk size, low-water chunks, initial delivery, pending
/// requests). GrandCentral's I/O sizes its reads from the channel's water marks and has no
/// such knobs; the call is accepted and changes nothing.
@_cdecl("_dispatch_iocntl")
public func _dispatch_iocntl(_ parameter: UInt32, _ value: UInt64) {}

/// launchd's hook to make libdispatch process pending kernel events on the calling thread.
/// libdispatch's Linux build does nothing here, and neither does this: GrandCentral's
/// event thread processes events as they arrive.
@_cdecl("_dispatch_poll_for_events_4launchd")
public func _dispatch_poll_for_events_4launchd() {}

/// Network.framework's question "should the workloop item running on this thread yield to
/// higher-priority work?". Workloops run in submission order (Queue/DispatchWorkloop.swift), so
/// never, as on libdispatch's Linux build.
@_cdecl("_dispatch_workloop_should_yield_4NW")
public func _dispatch_workloop_should_yield_4NW() -> Bool { false }
