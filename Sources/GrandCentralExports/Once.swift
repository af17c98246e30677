// dispatch_once: the header's inline fast path handles the done case.

@_cdecl("dispatch_once_f")
public func dispatch_once_f(_ predicate: UnsafeMutablePointer<Int>?, _ context: UnsafeMutableRawPointer?,
                            _ function: dispatch_function_t?) {
    guard let predicate else { clientBug("dispatch_once_f", "predicate is NULL") }
    if predicate.pointee == -1 { return }
    DispatchOnce.perform(predicate, context, work(function, "dispatch_once_f"))
}
