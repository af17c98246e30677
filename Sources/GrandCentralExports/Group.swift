// Groups.

@_cdecl("dispatch_group_create")
public func dispatch_group_create() -> UnsafeMutableRawPointer {
    retainedHandle(DispatchGroup())
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
                                    _ context: UnsafeMutableRawPointer?, _ function: DispatchFunction?) {
    let f = work(function, "dispatch_group_notify_f")
    let target = queue(q, "dispatch_group_notify_f").takeUnretainedValue()
    group(g, "dispatch_group_notify_f")._withUnsafeGuaranteedRef { $0.notify(queue: target, function: f, context: context) }
}

@_cdecl("dispatch_group_async_f")
public func dispatch_group_async_f(_ g: UnsafeMutableRawPointer?, _ q: UnsafeMutableRawPointer?,
                                   _ context: UnsafeMutableRawPointer?, _ function: DispatchFunction?) {
    let f = work(function, "dispatch_group_async_f")
    let target = queue(q, "dispatch_group_async_f")
    group(g, "dispatch_group_async_f")._withUnsafeGuaranteedRef { g in
        target._withUnsafeGuaranteedRef { g.async(queue: $0, function: f, context: context) }
    }
}
