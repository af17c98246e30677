// Groups.

@_cdecl("dispatch_group_create")
public func dispatch_group_create() -> UnsafeMutableRawPointer {
    retainedHandle(DispatchGroup.makeForCAPI())
}

@_cdecl("dispatch_group_enter")
public func dispatch_group_enter(_ g: UnsafeMutableRawPointer?) {
    group(g, "dispatch_group_enter")._withUnsafeGuaranteedRef { $0.enter() }
}

@_cdecl("dispatch_group_leave")
public func dispatch_group_leave(_ g: UnsafeMutableRawPointer?) {
    group(g, "dispatch_group_leave")._withUnsafeGuaranteedRef { $0.leave() }
}

@_cdecl("dispatch_group_wait")
public func dispatch_group_wait(_ g: UnsafeMutableRawPointer?, _ timeout: UInt64) -> Int {
    group(g, "dispatch_group_wait")._withUnsafeGuaranteedRef {
        $0.wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout)) ? 0 : 1
    }
}

@_cdecl("dispatch_group_notify_f")
public func dispatch_group_notify_f(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?,
                                    _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    groupNotify(g, q, context, function, [], "dispatch_group_notify_f")
}

/// dispatch_group_notify with flags, for the block shim (a barrier work item).
@_cdecl("gc_group_notify_flags_f")
public func gc_group_notify_flags_f(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?,
                                    _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?, _ flags: UInt) {
    groupNotify(g, q, context, function, submitFlags(flags), "dispatch_group_notify")
}

@inline(__always)
private func groupNotify(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                         _ function: dispatch_function_t?, _ flags: ContinuationFlags, _ name: StaticString) {
    let f = work(function, name)
    let target = queue(q, name).takeUnretainedValue()
    group(g, name)._withUnsafeGuaranteedRef { $0.notify(queue: target, function: f, context: context, flags: flags) }
}

@_cdecl("dispatch_group_async_f")
public func dispatch_group_async_f(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?,
                                   _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) {
    groupAsync(g, q, context, function, [], "dispatch_group_async_f")
}

/// dispatch_group_async with flags, for the block shim (a barrier work item).
@_cdecl("gc_group_async_flags_f")
public func gc_group_async_flags_f(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?,
                                   _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?, _ flags: UInt) {
    groupAsync(g, q, context, function, submitFlags(flags), "dispatch_group_async")
}

@inline(__always)
private func groupAsync(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                        _ function: dispatch_function_t?, _ flags: ContinuationFlags, _ name: StaticString) {
    let f = work(function, name)
    let target = queue(q, name)
    group(g, name)._withUnsafeGuaranteedRef { g in
        target._withUnsafeGuaranteedRef { g.async(queue: $0, function: f, context: context, flags: flags) }
    }
}
