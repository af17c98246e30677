import CGrandCentral
import Glibc

// dispatch_object_t: reference counting, context, finalizer, suspension, targets, debug.

@_cdecl("dispatch_retain")
public func dispatch_retain(_ handle: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_retain")._withUnsafeGuaranteedRef { $0.retainExternal("dispatch_retain") }
}

@_cdecl("dispatch_release")
public func dispatch_release(_ handle: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_release")._withUnsafeGuaranteedRef { $0.releaseExternal("dispatch_release") }
}

@_cdecl("dispatch_get_context")
public func dispatch_get_context(_ handle: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    object(handle, "dispatch_get_context")._withUnsafeGuaranteedRef { $0.isGlobal ? nil : $0.context }
}

@_cdecl("dispatch_set_context")
public func dispatch_set_context(_ handle: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_set_context")._withUnsafeGuaranteedRef { if !$0.isGlobal { $0.context = context } }
}

@_cdecl("dispatch_set_finalizer_f")
public func dispatch_set_finalizer_f(_ handle: UnsafeMutableRawPointer?, _ finalizer: dispatch_function_t?) {
    object(handle, "dispatch_set_finalizer_f")._withUnsafeGuaranteedRef { if !$0.isGlobal { $0.finalizer = finalizer } }
}

@_cdecl("dispatch_suspend")
public func dispatch_suspend(_ handle: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_suspend")._withUnsafeGuaranteedRef { $0.suspendObject() }
}

@_cdecl("dispatch_resume")
public func dispatch_resume(_ handle: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_resume")._withUnsafeGuaranteedRef { $0.resumeObject(caller: "dispatch_resume") }
}

@_cdecl("dispatch_activate")
public func dispatch_activate(_ handle: UnsafeMutableRawPointer?) {
    object(handle, "dispatch_activate")._withUnsafeGuaranteedRef { $0.activateObject() }
}

@_cdecl("dispatch_set_target_queue")
public func dispatch_set_target_queue(_ handle: UnsafeMutableRawPointer?, _ target: UnsafeMutableRawPointer?) {
    let newTarget = target.map { queue($0, "dispatch_set_target_queue").takeUnretainedValue() }
    object(handle, "dispatch_set_target_queue")._withUnsafeGuaranteedRef {
        $0.setTargetObject(newTarget, caller: "dispatch_set_target_queue")
    }
}

/// The description dispatch_debug/dispatch_debugv print (they are variadic, so they
/// live in C: GrandCentralBlocks/variadic.c). Returns a malloc'ed string.
@_cdecl("_gc_debug_description")
public func _gc_debug_description(_ handle: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar>? {
    let description = handle.map { debugLine($0, "dispatch_debug") } ?? "NULL"
    return strdup(description)
}
