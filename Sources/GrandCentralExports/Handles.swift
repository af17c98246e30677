import CGrandCentral

// Turning C handles into engine objects. Every exported function checks its handle here:
// NULL, or a handle of the wrong kind, is a client bug with a clear message. The
// conversions are unmanaged: the caller's reference keeps the object alive for the call.

@inline(__always)
func object(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchObject> {
    guard let handle else { clientBug(function, "object is NULL") }
    return objectFromHandle(handle)
}

@inline(__always)
func queue(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchQueue> {
    guard let handle else { clientBug(function, "queue is NULL") }
    let o = objectFromHandle(handle)
    if o._withUnsafeGuaranteedRef({ $0.kind }) != .queue { clientBug(function, "object is not a queue") }
    return unsafeBitCast(o, to: Unmanaged<DispatchQueue>.self)
}

@inline(__always)
func group(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchGroup> {
    guard let handle else { clientBug(function, "group is NULL") }
    let o = Unmanaged<DispatchObject>.fromOpaque(handle)
    if o._withUnsafeGuaranteedRef({ $0.kind }) != .group { clientBug(function, "object is not a group") }
    return unsafeBitCast(o, to: Unmanaged<DispatchGroup>.self)
}

@inline(__always)
func semaphore(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchSemaphore> {
    guard let handle else { clientBug(function, "semaphore is NULL") }
    let o = Unmanaged<DispatchObject>.fromOpaque(handle)
    if o._withUnsafeGuaranteedRef({ $0.kind }) != .semaphore { clientBug(function, "object is not a semaphore") }
    return unsafeBitCast(o, to: Unmanaged<DispatchSemaphore>.self)
}

@inline(__always)
func work(_ function: DispatchFunction?, _ name: StaticString) -> DispatchFunction {
    guard let function else { clientBug(name, "function is NULL") }
    return function
}
