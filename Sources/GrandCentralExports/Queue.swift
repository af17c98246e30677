import CGrandCentral
import Glibc

// Queues: creation, attributes, submission, sync, apply, labels, QoS, specifics, assertions.

public typealias DispatchApplyFunction = @convention(c) (UnsafeMutableRawPointer?, Int) -> Void

@inline(__always)
func attributes(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> QueueAttributes {
    guard let attributes = QueueAttributes.from(handle: handle) else {
        clientBug(function, "invalid queue attribute")
    }
    return attributes
}

@_cdecl("dispatch_queue_create")
public func dispatch_queue_create(_ label: UnsafePointer<CChar>?, _ attr: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer {
    let a = attributes(attr, "dispatch_queue_create")
    return retainedHandle(DispatchQueue.make(label: label, attributes: a, target: nil))
}

@_cdecl("dispatch_queue_create_with_target")
public func dispatch_queue_create_with_target(_ label: UnsafePointer<CChar>?, _ attr: UnsafeMutableRawPointer?,
                                              _ target: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer {
    let a = attributes(attr, "dispatch_queue_create_with_target")
    let t = target.map { queue($0, "dispatch_queue_create_with_target").takeUnretainedValue() }
    return retainedHandle(DispatchQueue.make(label: label, attributes: a, target: t))
}

@_cdecl("dispatch_queue_attr_make_initially_inactive")
public func dispatch_queue_attr_make_initially_inactive(_ attr: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    var a = attributes(attr, "dispatch_queue_attr_make_initially_inactive")
    a.isInitiallyInactive = true
    return a.handle
}

@_cdecl("dispatch_queue_attr_make_with_qos_class")
public func dispatch_queue_attr_make_with_qos_class(_ attr: UnsafeMutableRawPointer?, _ qos: UInt32,
                                                    _ relativePriority: Int32) -> UnsafeMutableRawPointer? {
    var a = attributes(attr, "dispatch_queue_attr_make_with_qos_class")
    guard let q = QoSLevel(rawValue: qos), relativePriority <= 0, relativePriority >= -15 else {
        return attr  // libdispatch ignores an invalid QoS class or priority
    }
    a.qos = q
    a.relativePriority = relativePriority
    return a.handle
}

@_cdecl("dispatch_queue_attr_make_with_autorelease_frequency")
public func dispatch_queue_attr_make_with_autorelease_frequency(_ attr: UnsafeMutableRawPointer?, _ frequency: UInt) -> UnsafeMutableRawPointer? {
    var a = attributes(attr, "dispatch_queue_attr_make_with_autorelease_frequency")
    if frequency > 2 { return attr }
    a.autoreleaseFrequency = Int(frequency)  // accepted and recorded; Linux has no autorelease pools
    return a.handle
}

@_cdecl("dispatch_queue_attr_make_with_overcommit")
public func dispatch_queue_attr_make_with_overcommit(_ attr: UnsafeMutableRawPointer?, _ overcommit: Bool) -> UnsafeMutableRawPointer? {
    var a = attributes(attr, "dispatch_queue_attr_make_with_overcommit")
    a.overcommit = overcommit
    return a.handle
}

@_cdecl("dispatch_get_global_queue")
public func dispatch_get_global_queue(_ identifier: Int, _ flags: UInt) -> UnsafeMutableRawPointer? {
    let overcommitFlag: UInt = 0x2  // DISPATCH_QUEUE_OVERCOMMIT, the one flag defined
    guard flags & ~overcommitFlag == 0,
          let q = RootQueues.queue(identifier: identifier, overcommit: flags & overcommitFlag != 0) else {
        return nil  // libdispatch returns NULL for an unknown identifier or flag
    }
    return q.handle
}

@_cdecl("dispatch_main")
public func dispatch_main() -> Never {
    MainQueueDriver.run()
}

@_cdecl("dispatch_async_f")
public func dispatch_async_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_async_f")
    queue(q, "dispatch_async_f")._withUnsafeGuaranteedRef { $0.enqueue(f, context) }
}

@_cdecl("dispatch_barrier_async_f")
public func dispatch_barrier_async_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_barrier_async_f")
    queue(q, "dispatch_barrier_async_f")._withUnsafeGuaranteedRef { $0.enqueue(f, context, .barrier) }
}

@_cdecl("dispatch_sync_f")
public func dispatch_sync_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_sync_f")
    queue(q, "dispatch_sync_f")._withUnsafeGuaranteedRef { $0.sync(f, context, barrier: false, caller: "dispatch_sync_f") }
}

@_cdecl("dispatch_barrier_sync_f")
public func dispatch_barrier_sync_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_barrier_sync_f")
    queue(q, "dispatch_barrier_sync_f")._withUnsafeGuaranteedRef { $0.sync(f, context, barrier: true, caller: "dispatch_barrier_sync_f") }
}

@_cdecl("dispatch_async_and_wait_f")
public func dispatch_async_and_wait_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_async_and_wait_f")
    queue(q, "dispatch_async_and_wait_f")._withUnsafeGuaranteedRef { $0.sync(f, context, barrier: false, caller: "dispatch_async_and_wait_f") }
}

@_cdecl("dispatch_barrier_async_and_wait_f")
public func dispatch_barrier_async_and_wait_f(_ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_barrier_async_and_wait_f")
    queue(q, "dispatch_barrier_async_and_wait_f")._withUnsafeGuaranteedRef { $0.sync(f, context, barrier: true, caller: "dispatch_barrier_async_and_wait_f") }
}

@_cdecl("dispatch_apply_f")
public func dispatch_apply_f(_ iterations: Int, _ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                             _ function: DispatchApplyFunction?) {
    guard let function else { clientBug("dispatch_apply_f", "function is NULL") }
    // DISPATCH_APPLY_AUTO is NULL: the root queue of the current QoS (the default one).
    let target = q.map { queue($0, "dispatch_apply_f").takeUnretainedValue() } ?? RootQueues.defaultQueue
    target.apply(iterations: iterations, context: context, work: function)
}

@_cdecl("dispatch_queue_get_label")
public func dispatch_queue_get_label(_ q: UnsafeMutableRawPointer?) -> UnsafePointer<CChar> {
    // DISPATCH_CURRENT_QUEUE_LABEL is NULL.
    let target = q.map { queue($0, "dispatch_queue_get_label").takeUnretainedValue() } ?? DispatchQueue.currentQueue
    if let label = target?.labelPointer { return UnsafePointer(label) }
    return emptyLabel
}

private let emptyLabel: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.initialize(to: 0)
    return UnsafePointer(p)
}()

@_cdecl("dispatch_queue_get_qos_class")
public func dispatch_queue_get_qos_class(_ q: UnsafeMutableRawPointer?, _ relativePriority: UnsafeMutablePointer<Int32>?) -> UInt32 {
    queue(q, "dispatch_queue_get_qos_class")._withUnsafeGuaranteedRef { q in
        relativePriority?.pointee = q.qosLevel == .unspecified ? 0 : q.relativePriority
        return q.qosLevel.rawValue
    }
}

@_cdecl("dispatch_queue_set_specific")
public func dispatch_queue_set_specific(_ q: UnsafeMutableRawPointer?, _ key: UnsafeRawPointer?,
                                        _ context: UnsafeMutableRawPointer?, _ destructor: dispatch_function_t?) {
    guard let key else { return }  // libdispatch ignores a NULL key
    queue(q, "dispatch_queue_set_specific")._withUnsafeGuaranteedRef {
        $0.setSpecific(key: key, context: context, destructor: destructor)
    }
}

@_cdecl("dispatch_queue_get_specific")
public func dispatch_queue_get_specific(_ q: UnsafeMutableRawPointer?, _ key: UnsafeRawPointer?) -> UnsafeMutableRawPointer? {
    guard let key else { return nil }
    return queue(q, "dispatch_queue_get_specific")._withUnsafeGuaranteedRef { $0.getSpecific(key: key) }
}

@_cdecl("dispatch_get_specific")
public func dispatch_get_specific(_ key: UnsafeRawPointer?) -> UnsafeMutableRawPointer? {
    guard let key else { return nil }
    return DispatchQueue.currentSpecific(key: key)
}

@_cdecl("dispatch_assert_queue")
public func dispatch_assert_queue(_ q: UnsafeMutableRawPointer?) {
    if !queue(q, "dispatch_assert_queue")._withUnsafeGuaranteedRef({ $0.isCurrent() }) {
        clientBug("dispatch_assert_queue", "block was expected to execute on the given queue")
    }
}

@_cdecl("dispatch_assert_queue_barrier")
public func dispatch_assert_queue_barrier(_ q: UnsafeMutableRawPointer?) {
    if !queue(q, "dispatch_assert_queue_barrier")._withUnsafeGuaranteedRef({ $0.isCurrentAsBarrier() }) {
        clientBug("dispatch_assert_queue_barrier", "block was expected to act as a barrier on the given queue")
    }
}

@_cdecl("dispatch_assert_queue_not")
public func dispatch_assert_queue_not(_ q: UnsafeMutableRawPointer?) {
    if queue(q, "dispatch_assert_queue_not")._withUnsafeGuaranteedRef({ $0.isCurrent() }) {
        clientBug("dispatch_assert_queue_not", "block was expected not to execute on the given queue")
    }
}

@_cdecl("dispatch_get_current_queue")
public func dispatch_get_current_queue() -> UnsafeMutableRawPointer? {
    (DispatchQueue.currentQueue ?? RootQueues.defaultQueue).handle
}

@_cdecl("dispatch_queue_set_width")
public func dispatch_queue_set_width(_ q: UnsafeMutableRawPointer?, _ width: Int) {
    queue(q, "dispatch_queue_set_width")._withUnsafeGuaranteedRef { $0.setWidth(width) }
}

@_cdecl("dispatch_after_f")
public func dispatch_after_f(_ when: UInt64, _ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                             _ function: dispatch_function_t?) {
    let f = work(function, "dispatch_after_f")
    queue(q, "dispatch_after_f")._withUnsafeGuaranteedRef { $0.after(when, f, context) }
}

/// dispatch_after with flags, for the block shim (a barrier work item).
@_cdecl("gc_after_flags_f")
public func gc_after_flags_f(_ when: UInt64, _ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                             _ function: dispatch_function_t?, _ flags: UInt) {
    let f = work(function, "dispatch_after")
    queue(q, "dispatch_after")._withUnsafeGuaranteedRef { $0.after(when, f, context, submitFlags(flags)) }
}
