import CGrandCentral
import Glibc

// io.h: I/O channels (engine: Sources/GrandCentral/IO). A channel's handle is the
// IOChannel itself. Handlers receive data handles (the empty object as
// `&_dispatch_data_empty`) borrowed for the call. Sizes arrive as UInt (size_t) and clamp.

public typealias dispatch_io_handler_function_t = @convention(c) (
    UnsafeMutableRawPointer?, Bool, UnsafeMutableRawPointer?, Int32) -> Void
public typealias dispatch_io_cleanup_function_t = @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void
public typealias dispatch_io_convenience_handler_function_t = @convention(c) (
    UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int32) -> Void

@inline(__always)
func channel(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<IOChannel> {
    typedObject(handle, .io, function, ifNull: "channel is NULL", ifWrongKind: "object is not an I/O channel")
}

/// A borrowed data handle for a handler call.
@inline(__always)
private func borrowedDataHandle(_ data: Unmanaged<DataObject>?) -> UnsafeMutableRawPointer? {
    data.map(dataHandle)
}

/// Boxes a C pointer so the handler closures may capture it (the client synchronizes).
private struct Context: @unchecked Sendable { let pointer: UnsafeMutableRawPointer? }

private func ioType(_ raw: UInt, _ function: StaticString) -> IOChannelType? {
    switch raw {
    case 0: return .stream
    case 1: return .random
    default: return nil
    }
}

private func cleanupBody(_ context: UnsafeMutableRawPointer?, _ handler: dispatch_io_cleanup_function_t?)
    -> ((Int32) -> Void)? {
    guard let handler else { return nil }
    let box = Context(pointer: context)
    return { error in handler(box.pointer, error) }
}

/// A new channel, or NULL for a type that is neither STREAM nor RANDOM (as libdispatch).
private func makeChannel(_ type: UInt, _ descriptor: IODescriptor, _ queueHandle: UnsafeMutableRawPointer?,
                         _ context: UnsafeMutableRawPointer?, _ handler: dispatch_io_cleanup_function_t?,
                         _ function: StaticString) -> UnsafeMutableRawPointer? {
    let q = queue(queueHandle, function).takeUnretainedValue()
    guard let t = ioType(type, function) else { return nil }
    let c = IOChannel(type: t, descriptor: descriptor, cleanupQueue: q, cleanupHandler: cleanupBody(context, handler))
    return retainedHandle(c)
}

@_cdecl("dispatch_io_create_f")
public func dispatch_io_create_f(_ type: UInt, _ fd: Int32, _ queue: UnsafeMutableRawPointer?,
                                 _ context: UnsafeMutableRawPointer?,
                                 _ cleanup: dispatch_io_cleanup_function_t?) -> UnsafeMutableRawPointer? {
    // The type first: a descriptor entry taken for a channel that is never made would keep
    // the descriptor non-blocking.
    guard ioType(type, "dispatch_io_create_f") != nil else { return nil }
    return makeChannel(type, IODescriptor.shared(descriptor: fd), queue, context, cleanup, "dispatch_io_create_f")
}

@_cdecl("dispatch_io_create_with_path_f")
public func dispatch_io_create_with_path_f(_ type: UInt, _ path: UnsafePointer<CChar>?, _ oflag: Int32, _ mode: UInt32,
                                           _ queue: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                                           _ cleanup: dispatch_io_cleanup_function_t?) -> UnsafeMutableRawPointer? {
    guard let path else { clientBug("dispatch_io_create_with_path_f", "path is NULL") }
    // NULL for an unknown type or a relative path, as libdispatch (checked before the path
    // is looked at).
    guard let t = ioType(type, "dispatch_io_create_with_path_f"), path.pointee == 0x2F /* '/' */ else { return nil }
    return makeChannel(type, IODescriptor(path: path, oflag: oflag, mode: mode, random: t == .random), queue, context,
                       cleanup, "dispatch_io_create_with_path_f")
}

@_cdecl("dispatch_io_create_with_io_f")
public func dispatch_io_create_with_io_f(_ type: UInt, _ io: UnsafeMutableRawPointer?, _ queue: UnsafeMutableRawPointer?,
                                         _ context: UnsafeMutableRawPointer?,
                                         _ cleanup: dispatch_io_cleanup_function_t?) -> UnsafeMutableRawPointer? {
    let source = channel(io, "dispatch_io_create_with_io_f")
    guard ioType(type, "dispatch_io_create_with_io_f") != nil else { return nil }
    // A closed source (closed or stopped, operations still pending or not) gives a channel
    // that fails with ECANCELED, for its operations and its cleanup handler, as in
    // libdispatch: it neither shares the descriptor nor keeps the source's cleanup waiting.
    // An open source shares its descriptor entry (one more user).
    let descriptor = source._withUnsafeGuaranteedRef { $0.descriptorForNewChannel() } ?? IODescriptor(failed: ECANCELED)
    return makeChannel(type, descriptor, queue, context, cleanup, "dispatch_io_create_with_io_f")
}

@_cdecl("dispatch_io_read_f")
public func dispatch_io_read_f(_ handle: UnsafeMutableRawPointer?, _ offset: Int64, _ length: UInt,
                               _ queueHandle: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                               _ handler: dispatch_io_handler_function_t?) {
    let c = channel(handle, "dispatch_io_read_f").takeUnretainedValue()
    let q = queue(queueHandle, "dispatch_io_read_f").takeUnretainedValue()
    guard let handler else { clientBug("dispatch_io_read_f", "handler is NULL") }
    let box = Context(pointer: context)
    c.submit(IOOperation.read(c, offset: offset, length: Int(clamping: length), queue: q) { done, data, error in
        handler(box.pointer, done, borrowedDataHandle(data), error)
    })
}

@_cdecl("dispatch_io_write_f")
public func dispatch_io_write_f(_ handle: UnsafeMutableRawPointer?, _ offset: Int64, _ dataHandle: UnsafeMutableRawPointer?,
                                _ queueHandle: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                                _ handler: dispatch_io_handler_function_t?) {
    let c = channel(handle, "dispatch_io_write_f").takeUnretainedValue()
    let data = dataObject(dataHandle, "dispatch_io_write_f")
    let q = queue(queueHandle, "dispatch_io_write_f").takeUnretainedValue()
    guard let handler else { clientBug("dispatch_io_write_f", "handler is NULL") }
    let box = Context(pointer: context)
    c.submit(IOOperation.write(c, offset: offset, data: data, queue: q) { done, rest, error in
        handler(box.pointer, done, borrowedDataHandle(rest), error)
    })
}

@_cdecl("dispatch_io_close")
public func dispatch_io_close(_ handle: UnsafeMutableRawPointer?, _ flags: UInt) {
    channel(handle, "dispatch_io_close")._withUnsafeGuaranteedRef { $0.close(stop: flags & 1 != 0) }
}

@_cdecl("dispatch_io_barrier_f")
public func dispatch_io_barrier_f(_ handle: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                                  _ barrier: dispatch_function_t?) {
    let c = channel(handle, "dispatch_io_barrier_f")
    guard let barrier else { clientBug("dispatch_io_barrier_f", "barrier is NULL") }
    let box = Context(pointer: context)
    c._withUnsafeGuaranteedRef { $0.barrier { barrier(box.pointer) } }
}

@_cdecl("dispatch_io_get_descriptor")
public func dispatch_io_get_descriptor(_ handle: UnsafeMutableRawPointer?) -> Int32 {
    channel(handle, "dispatch_io_get_descriptor")._withUnsafeGuaranteedRef { $0.currentDescriptor }
}

@_cdecl("dispatch_io_set_high_water")
public func dispatch_io_set_high_water(_ handle: UnsafeMutableRawPointer?, _ highWater: UInt) {
    channel(handle, "dispatch_io_set_high_water")._withUnsafeGuaranteedRef { $0.setHighWater(Int(clamping: highWater)) }
}

@_cdecl("dispatch_io_set_low_water")
public func dispatch_io_set_low_water(_ handle: UnsafeMutableRawPointer?, _ lowWater: UInt) {
    channel(handle, "dispatch_io_set_low_water")._withUnsafeGuaranteedRef { $0.setLowWater(Int(clamping: lowWater)) }
}

@_cdecl("dispatch_io_set_interval")
public func dispatch_io_set_interval(_ handle: UnsafeMutableRawPointer?, _ interval: UInt64, _ flags: UInt) {
    channel(handle, "dispatch_io_set_interval")._withUnsafeGuaranteedRef { $0.setInterval(interval, strict: flags & 1 != 0) }
}

@_cdecl("dispatch_read_f")
public func dispatch_read_f(_ fd: Int32, _ length: UInt, _ queueHandle: UnsafeMutableRawPointer?,
                            _ context: UnsafeMutableRawPointer?, _ handler: dispatch_io_convenience_handler_function_t?) {
    let q = queue(queueHandle, "dispatch_read_f").takeUnretainedValue()
    guard let handler else { clientBug("dispatch_read_f", "handler is NULL") }
    let box = Context(pointer: context)
    IOChannel.readAll(descriptor: fd, length: Int(clamping: length), queue: q) { data, error in
        handler(box.pointer, borrowedDataHandle(data), error)
    }
}

@_cdecl("dispatch_write_f")
public func dispatch_write_f(_ fd: Int32, _ dataHandle: UnsafeMutableRawPointer?, _ queueHandle: UnsafeMutableRawPointer?,
                             _ context: UnsafeMutableRawPointer?, _ handler: dispatch_io_convenience_handler_function_t?) {
    let data = dataObject(dataHandle, "dispatch_write_f")
    let q = queue(queueHandle, "dispatch_write_f").takeUnretainedValue()
    guard let handler else { clientBug("dispatch_write_f", "handler is NULL") }
    let box = Context(pointer: context)
    IOChannel.writeAll(descriptor: fd, data: data, queue: q) { rest, error in
        handler(box.pointer, borrowedDataHandle(rest), error)
    }
}
