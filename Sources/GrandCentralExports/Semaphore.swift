// Semaphores. The two hot calls are @inline(__always): their bodies are compiled into the
// C-callable thunks @_cdecl makes, instead of a thunk that jumps to them.

@_cdecl("dispatch_semaphore_create")
public func dispatch_semaphore_create(_ value: Int) -> UnsafeMutableRawPointer? {
    if value < 0 { return nil }
    return retainedHandle(DispatchSemaphore(validatedValue: value))
}

@_cdecl("dispatch_semaphore_wait")
@inline(__always)
public func dispatch_semaphore_wait(_ s: UnsafeMutableRawPointer?, _ timeout: UInt64) -> Int {
    semaphore(s, "dispatch_semaphore_wait")._withUnsafeGuaranteedRef {
        $0.waitSemaphore(deadline: timeout) ? 0 : 1
    }
}

@_cdecl("dispatch_semaphore_signal")
@inline(__always)
public func dispatch_semaphore_signal(_ s: UnsafeMutableRawPointer?) -> Int {
    semaphore(s, "dispatch_semaphore_signal")._withUnsafeGuaranteedRef { $0.signalSemaphore() ? 1 : 0 }
}
