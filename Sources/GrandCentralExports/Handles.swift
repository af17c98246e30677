import CGrandCentral

// Turning C handles into engine objects. Every exported function checks its handle here:
// NULL, or a handle of the wrong kind, is a client bug with a clear message. The
// conversions are unmanaged: the caller's reference keeps the object alive for the call.

@inline(__always)
func object(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchObject> {
    guard let handle else { clientBug(function, "object is NULL") }
    return objectFromHandle(handle)
}

/// A handle that must be an object of `kind`; NULL or another kind is a client bug.
@inline(__always)
func typedObject<T: DispatchObject>(_ handle: UnsafeMutableRawPointer?, _ kind: ObjectKind, _ function: StaticString,
                                    ifNull: StaticString, ifWrongKind: StaticString) -> Unmanaged<T> {
    guard let handle else { clientBug(function, ifNull) }
    let o = objectFromHandle(handle)
    if o._withUnsafeGuaranteedRef({ $0.kind }) != kind { clientBug(function, ifWrongKind) }
    return unsafeBitCast(o, to: Unmanaged<T>.self)
}

@inline(__always)
func queue(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchQueue> {
    typedObject(handle, .queue, function, ifNull: "queue is NULL", ifWrongKind: "object is not a queue")
}

@inline(__always)
func group(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchGroup> {
    typedObject(handle, .group, function, ifNull: "group is NULL", ifWrongKind: "object is not a group")
}

@inline(__always)
func semaphore(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchSemaphore> {
    typedObject(handle, .semaphore, function, ifNull: "semaphore is NULL", ifWrongKind: "object is not a semaphore")
}

@inline(__always)
func work(_ function: DispatchFunction?, _ name: StaticString) -> DispatchFunction {
    guard let function else { clientBug(name, "function is NULL") }
    return function
}

/// The flags word of the internal entry points the block shims call (`gc_*_flags_f`;
/// GrandCentralBlocks/shim.h spells the bits): bit 0 is "run as a barrier". They are not
/// libdispatch's names, so the version script keeps them out of the dynamic symbol table.
@inline(__always)
func submitFlags(_ raw: UInt) -> ContinuationFlags {
    raw & 1 != 0 ? .barrier : []
}
