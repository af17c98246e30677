import CGrandCentral
import GrandCentralSymbols
import Glibc

// data.h: data objects (engine: Sources/GrandCentral/Data). A handle is the data object
// itself, except the empty object, whose handle is `&_dispatch_data_empty` both ways.
// Sizes and offsets are size_t in C; they arrive as UInt so huge values clamp, not wrap.

/// The C signature of dispatch_data_applier_function_t.
public typealias DataApplierFunction = @convention(c) (
    UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int, UnsafeRawPointer?, Int) -> Bool

@inline(__always)
func dataObject(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DataObject> {
    typedObject(handle, .data, function, ifNull: "data object is NULL", ifWrongKind: "object is not a data object")
}

/// The engine's form of a C destructor argument; nil means copy now (DEFAULT).
private func dataDestructor(_ buffer: UnsafeRawPointer?, _ queueHandle: UnsafeMutableRawPointer?,
                            _ destructor: dispatch_function_t?, _ function: StaticString) -> DataDestructor? {
    guard let destructor else { return nil }
    let bits = unsafeBitCast(destructor, to: UnsafeRawPointer.self)
    if bits == gc_data_destructor_free_value() { return .free }
    if bits == gc_data_destructor_munmap_value() { return .munmap }
    if bits == gc_data_destructor_none_value() { return DataDestructor.none }
    let queue = queueHandle.map { GrandCentral.queue($0, function).takeUnretainedValue() }
    return .function(destructor, UnsafeMutableRawPointer(mutating: buffer), queue)
}

@_cdecl("dispatch_data_create_f")
public func dispatch_data_create_f(_ buffer: UnsafeRawPointer?, _ size: UInt, _ queue: UnsafeMutableRawPointer?,
                                   _ destructor: dispatch_function_t?) -> UnsafeMutableRawPointer {
    let size = Int(clamping: size)
    guard let kind = dataDestructor(buffer, queue, destructor, "dispatch_data_create_f") else {
        return dataHandle(DataObject.makeCopy(bytes: buffer, size: size))
    }
    return dataHandle(DataObject.make(bytes: buffer, size: size, destructor: kind))
}

/// dispatch_data_create with a block destructor (GrandCentralBlocks/data.c): `function`
/// is the block trampoline and `context` the copied block. Not exported.
@_cdecl("_gc_data_create_with_destructor")
public func _gc_data_create_with_destructor(_ buffer: UnsafeRawPointer?, _ size: UInt, _ queueHandle: UnsafeMutableRawPointer?,
                                            _ function: dispatch_function_t, _ context: UnsafeMutableRawPointer?)
    -> UnsafeMutableRawPointer {
    let queue = queueHandle.map { GrandCentral.queue($0, "dispatch_data_create").takeUnretainedValue() }
    return dataHandle(DataObject.make(bytes: buffer, size: Int(clamping: size),
                                      destructor: .function(function, context, queue)))
}

@_cdecl("dispatch_data_get_size")
public func dispatch_data_get_size(_ handle: UnsafeMutableRawPointer?) -> Int {
    dataObject(handle, "dispatch_data_get_size").size
}

@_cdecl("dispatch_data_create_map")
public func dispatch_data_create_map(_ handle: UnsafeMutableRawPointer?,
                                     _ bufferPointer: UnsafeMutablePointer<UnsafeRawPointer?>?,
                                     _ sizePointer: UnsafeMutablePointer<Int>?) -> UnsafeMutableRawPointer {
    let map = dataObject(handle, "dispatch_data_create_map")._withUnsafeGuaranteedRef { $0.contiguous() }
    map._withUnsafeGuaranteedRef { m in
        bufferPointer?.pointee = m.bytes
        sizePointer?.pointee = m.size
    }
    return dataHandle(map)
}

@_cdecl("dispatch_data_create_concat")
public func dispatch_data_create_concat(_ first: UnsafeMutableRawPointer?,
                                        _ second: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer {
    let a = dataObject(first, "dispatch_data_create_concat")
    let b = dataObject(second, "dispatch_data_create_concat")
    return dataHandle(DataObject.concat(a, b))
}

@_cdecl("dispatch_data_create_subrange")
public func dispatch_data_create_subrange(_ handle: UnsafeMutableRawPointer?, _ offset: UInt,
                                          _ length: UInt) -> UnsafeMutableRawPointer {
    let data = dataObject(handle, "dispatch_data_create_subrange")
    // The engine clamps to the data's end; a size_t beyond Int.max is past any end.
    return dataHandle(DataObject.subrange(data, offset: Int(clamping: offset), length: Int(clamping: length)))
}

@_cdecl("dispatch_data_apply_f")
public func dispatch_data_apply_f(_ handle: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?,
                                  _ applier: DataApplierFunction?) -> Bool {
    let data = dataObject(handle, "dispatch_data_apply_f")
    guard let applier else { clientBug("dispatch_data_apply_f", "applier is NULL") }
    return data._withUnsafeGuaranteedRef { d in
        d.forEachRegion { region, offset, bytes, size in applier(context, region.toOpaque(), offset, bytes, size) }
    }
}

@_cdecl("dispatch_data_copy_region")
public func dispatch_data_copy_region(_ handle: UnsafeMutableRawPointer?, _ location: UInt,
                                      _ offsetPointer: UnsafeMutablePointer<Int>?) -> UnsafeMutableRawPointer {
    let data = dataObject(handle, "dispatch_data_copy_region")
    guard let offsetPointer else { clientBug("dispatch_data_copy_region", "offset_ptr is NULL") }
    return data._withUnsafeGuaranteedRef { d in
        if location >= UInt(d.size) {
            offsetPointer.pointee = d.size
            return gc_data_empty_symbol()
        }
        let (region, offset) = d.region(at: Int(location))
        region.retainData()
        offsetPointer.pointee = offset
        return dataHandle(region)
    }
}

// MARK: Private calls (private.h)

@_cdecl("dispatch_data_create_alloc")
public func dispatch_data_create_alloc(_ size: UInt,
                                       _ bufferPointer: UnsafeMutablePointer<UnsafeMutableRawPointer?>?)
    -> UnsafeMutableRawPointer {
    // As libdispatch: size 0 gives dispatch_data_empty and a NULL buffer.
    guard size > 0 else {
        bufferPointer?.pointee = nil
        return gc_data_empty_symbol()
    }
    guard let buffer = malloc(Int(clamping: size)) else { outOfMemory() }
    bufferPointer?.pointee = buffer
    return dataHandle(DataObject.make(bytes: buffer, size: Int(clamping: size), destructor: .free))
}

/// `dispatch_data_format_type_t` handles are the addresses of the
/// `_dispatch_data_format_type_*` objects (data_symbols.c): `{ GC_DATA_FORMAT_MAGIC, kind }`,
/// the kind a DataFormat (CGrandCentralKinds.h).
private func dataFormat(_ type: UnsafeRawPointer?, _ what: StaticString) -> DataFormat {
    guard let type else { clientBug("dispatch_data_create_with_transform", what) }
    guard type.load(as: UInt32.self) == GC_DATA_FORMAT_MAGIC,
          let format = DataFormat(rawValue: type.load(fromByteOffset: 4, as: UInt32.self)) else {
        clientBug("dispatch_data_create_with_transform", "not a DISPATCH_DATA_FORMAT_TYPE_* value")
    }
    return format
}

@_cdecl("dispatch_data_create_with_transform")
public func dispatch_data_create_with_transform(_ handle: UnsafeMutableRawPointer?, _ input: UnsafeRawPointer?,
                                                _ output: UnsafeRawPointer?) -> UnsafeMutableRawPointer? {
    let data = dataObject(handle, "dispatch_data_create_with_transform")
    let from = dataFormat(input, "input format is NULL")
    let to = dataFormat(output, "output format is NULL")
    return DataObject.transform(data, from: from, to: to).map(dataHandle)
}
