import CGrandCentral

// Workloops (private.h; engine: GrandCentral/Queue/DispatchWorkloop.swift). A workloop handle is a
// queue handle: every queue call takes one.

@inline(__always)
private func workloop(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> DispatchWorkloop {
    guard let w = queue(handle, function).takeUnretainedValue() as? DispatchWorkloop else {
        clientBug(function, "object is not a workloop")
    }
    return w
}

/// A setter of an inactive workloop's properties; an active one is a client bug, as in libdispatch.
@inline(__always)
private func inactiveWorkloop(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> DispatchWorkloop {
    let w = workloop(handle, function)
    if !w.isInactiveQueue { clientBug(function, "the workloop must be inactive") }
    return w
}

@_cdecl("dispatch_workloop_create")
public func dispatch_workloop_create(_ label: UnsafePointer<CChar>?) -> UnsafeMutableRawPointer {
    retainedHandle(DispatchWorkloop.make(label: label, inactive: false))
}

@_cdecl("dispatch_workloop_create_inactive")
public func dispatch_workloop_create_inactive(_ label: UnsafePointer<CChar>?) -> UnsafeMutableRawPointer {
    retainedHandle(DispatchWorkloop.make(label: label, inactive: true))
}

@_cdecl("dispatch_workloop_copy_current")
public func dispatch_workloop_copy_current() -> UnsafeMutableRawPointer? {
    guard let w = DispatchWorkloop.current else { return nil }
    w.retainExternal("dispatch_workloop_copy_current")   // the caller's reference
    return w.handle
}

@_cdecl("dispatch_workloop_is_current")
public func dispatch_workloop_is_current(_ handle: UnsafeMutableRawPointer?) -> Bool {
    workloop(handle, "dispatch_workloop_is_current").isCurrent()
}

/// Recorded; autorelease pools do not exist on Linux (the value changes nothing).
@_cdecl("dispatch_workloop_set_autorelease_frequency")
public func dispatch_workloop_set_autorelease_frequency(_ handle: UnsafeMutableRawPointer?, _ frequency: UInt) {
    inactiveWorkloop(handle, "dispatch_workloop_set_autorelease_frequency").autoreleaseFrequency = frequency
}

/// The workloop's QoS (dispatch_set_qos_class_floor on it); `flags` (FIXED_PRIORITY) is
/// accepted and has no effect.
@_cdecl("dispatch_workloop_set_qos_class_floor")
public func dispatch_workloop_set_qos_class_floor(_ handle: UnsafeMutableRawPointer?, _ qos: UInt32,
                                                  _ relativePriority: Int32, _ flags: UInt64) {
    let w = inactiveWorkloop(handle, "dispatch_workloop_set_qos_class_floor")
    guard let level = QoSLevel(rawValue: qos), relativePriority <= 0, relativePriority >= -15 else {
        clientBug("dispatch_workloop_set_qos_class_floor", "invalid QoS class or relative priority")
    }
    w.setQoSWhileInactive(level, relativePriority: relativePriority, caller: "dispatch_workloop_set_qos_class_floor")
}

/// dispatch_workloop_set_qos_class_floor(workloop, qos, 0, flags).
@_cdecl("dispatch_workloop_set_qos_class")
public func dispatch_workloop_set_qos_class(_ handle: UnsafeMutableRawPointer?, _ qos: UInt32, _ flags: UInt64) {
    let w = inactiveWorkloop(handle, "dispatch_workloop_set_qos_class")
    guard let level = QoSLevel(rawValue: qos) else {
        clientBug("dispatch_workloop_set_qos_class", "invalid QoS class")
    }
    w.setQoSWhileInactive(level, relativePriority: 0, caller: "dispatch_workloop_set_qos_class")
}

/// Recorded; limiting a thread's CPU share is a Darwin scheduler feature (the value changes nothing).
@_cdecl("dispatch_workloop_set_cpupercent")
public func dispatch_workloop_set_cpupercent(_ handle: UnsafeMutableRawPointer?, _ percent: UInt8, _ refillMilliseconds: UInt32) {
    inactiveWorkloop(handle, "dispatch_workloop_set_cpupercent").cpuPercent = (percent, refillMilliseconds)
}
