// Semaphores. The two hot calls are @inline(__always): their bodies are compiled into the
// C-callable thunks @_cdecl makes, instead of a thunk that jumps to them. Every way out of
// their fast path is a return or a tail call, so they keep no stack frame: a NULL test, a
// kind test, the atomic and a return (callgrind: 8 instructions each; libdispatch's 4 test
// neither NULL nor kind).

@_cdecl("dispatch_semaphore_create")
public func dispatch_semaphore_create(_ value: Int) -> UnsafeMutableRawPointer? {
    if value < 0 { return nil }
    return retainedHandle(DispatchSemaphore(validatedValue: value))
}

@_cdecl("dispatch_semaphore_wait")
@inline(__always)
public func dispatch_semaphore_wait(_ s: UnsafeMutableRawPointer?, _ timeout: UInt64) -> Int {
    guard let checked = semaphoreIfValid(s) else { return semaphoreBug(s, "dispatch_semaphore_wait") }
    return checked._withUnsafeGuaranteedRef { $0.waitSemaphoreStatus(deadline: timeout) }
}

@_cdecl("dispatch_semaphore_signal")
@inline(__always)
public func dispatch_semaphore_signal(_ s: UnsafeMutableRawPointer?) -> Int {
    guard let checked = semaphoreIfValid(s) else { return semaphoreBug(s, "dispatch_semaphore_signal") }
    return checked._withUnsafeGuaranteedRef { $0.signalSemaphore() }
}

/// The semaphore behind `handle`, or nil when it is NULL or not a semaphore (then
/// `semaphoreBug` reports it). Split so that every way out of the entry points' fast path
/// is a return or a tail call: they keep no stack frame.
@inline(__always)
func semaphoreIfValid(_ handle: UnsafeMutableRawPointer?) -> Unmanaged<DispatchSemaphore>? {
    guard let handle else { return nil }
    // The kind byte is read before any data-symbol compare, as in typedObject.
    let direct = Unmanaged<DispatchObject>.fromOpaque(handle)
    if direct._withUnsafeGuaranteedRef({ $0.kind }) != .semaphore { return nil }
    return unsafeBitCast(direct, to: Unmanaged<DispatchSemaphore>.self)
}

/// Reports the client bug `semaphoreIfValid` found (typedObject's messages); never returns.
@inline(never)
func semaphoreBug(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Int {
    _ = semaphore(handle, function)
    clientBug(function, "object is not a semaphore")
}
