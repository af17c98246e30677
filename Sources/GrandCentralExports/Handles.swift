import CGrandCentral
import GrandCentralSymbols

// The handle layer: turning C handles into engine objects and back. Every exported
// function checks its handle here: NULL, or a handle of the wrong kind, is a client bug
// with a clear message. The conversions are unmanaged: the caller's reference keeps the
// object alive for the call.
//
// A handle is the engine object's address, except for the objects libdispatch's header
// names by a data symbol (GrandCentralSymbols.h): the main queue is `&_dispatch_main_q`
// and the empty data object `&_dispatch_data_empty`, both ways. Queue attributes are not
// objects: each combination is an address of its own inside a table (below). The engine
// knows none of this (docs/ARCHITECTURE.md, "Layers").

// MARK: - Objects

/// The engine object behind a non-NULL C handle.
@inline(__always)
func objectFromHandle(_ handle: UnsafeMutableRawPointer) -> Unmanaged<DispatchObject> {
    if handle == gc_main_queue_symbol() {
        return Unmanaged.passUnretained(DispatchQueue.main)
    }
    if handle == gc_data_empty_symbol() {
        return Unmanaged.passUnretained(DataObject.empty)
    }
    return Unmanaged<DispatchObject>.fromOpaque(handle)
}

/// Returns a new object as a C handle carrying one ARC retain (see DispatchObject).
@inline(__always)
func retainedHandle(_ object: DispatchObject) -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(object).toOpaque()
}

extension DispatchQueue {
    /// The C handle of this queue (the main queue's is `&_dispatch_main_q`).
    var handle: UnsafeMutableRawPointer {
        if role == .main { return gc_main_queue_symbol() }
        return Unmanaged.passUnretained(self).toOpaque()
    }
}

/// The C handle of a data object (the empty one's is `&_dispatch_data_empty`); the
/// caller's count, if it owns one, travels with it.
@inline(__always)
func dataHandle(_ data: Unmanaged<DataObject>) -> UnsafeMutableRawPointer {
    data.size == 0 ? gc_data_empty_symbol() : data.toOpaque()
}

/// `dispatch_debug`'s line for the object behind `handle`:
/// `<kind>[0x<handle>] = { <field> = <value>, ... }` (DispatchObject's "Description"; the
/// engine writes the part in braces).
func debugLine(_ handle: UnsafeMutableRawPointer, _ function: StaticString) -> String {
    let address = String(UInt(bitPattern: handle), radix: 16)
    return object(handle, function)._withUnsafeGuaranteedRef { "\($0.kind)[0x\(address)] = " + $0.debugDescription() }
}

// MARK: - Queue attributes

extension QueueAttributes {
    /// Every combination's handle: `table + rawValue` in this static 8 KiB table, so each
    /// has one stable pointer and nothing is allocated per call. `DISPATCH_QUEUE_SERIAL` is
    /// NULL and `DISPATCH_QUEUE_CONCURRENT` is `&_dispatch_queue_attr_concurrent`.
    nonisolated(unsafe) static let table: UnsafeMutablePointer<UInt8> = {
        let t = UnsafeMutablePointer<UInt8>.allocate(capacity: 1 << 13)
        t.initialize(repeating: 0, count: 1 << 13)
        return t
    }()

    /// The C handle of these attributes.
    var handle: UnsafeMutableRawPointer? {
        if rawValue == 0 { return nil }
        if rawValue == 1 { return gc_attr_concurrent_symbol() }
        return UnsafeMutableRawPointer(Self.table + rawValue)
    }

    /// Decodes a C handle; nil for a pointer that is not an attribute.
    static func from(handle: UnsafeRawPointer?) -> QueueAttributes? {
        guard let handle else { return .serial }
        if handle == UnsafeRawPointer(gc_attr_concurrent_symbol()) { return .concurrent }
        let offset = handle - UnsafeRawPointer(table)
        guard offset >= 0 && offset < (1 << 13) else { return nil }
        return QueueAttributes(rawValue: offset)
    }
}

// MARK: - Checked conversions

/// `dispatch_function_t`: the C signature of a work item, spelled out here because the
/// exported functions are public and the engine's `DispatchFunction` is not.
public typealias dispatch_function_t = @convention(c) (UnsafeMutableRawPointer?) -> Void

@inline(__always)
func object(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<DispatchObject> {
    guard let handle else { clientBug(function, "object is NULL") }
    return objectFromHandle(handle)
}

/// A handle that must be an object of `kind`; NULL or another kind is a client bug.
///
/// For every kind but `.queue`, the handle's kind is read before it is compared with the
/// data symbols: those symbols are zero-filled and never written (data_symbols.c), so
/// their kind byte reads as `.queue` (0), which is not the kind asked for, and such a
/// handle takes the out-of-line path that maps it to its object (only data has such a
/// symbol; for the other kinds a mismatch is the client bug at once). A group's hot calls
/// then cost a NULL test, a kind test and their atomic, with no load of a symbol's address
/// from the GOT (the semaphore's entry points, which do the same in `semaphoreIfValid`,
/// went from 35 to 20 instructions a pair with this alone).
@inline(__always)
func typedObject<T: DispatchObject>(_ handle: UnsafeMutableRawPointer?, _ kind: ObjectKind, _ function: StaticString,
                                    ifNull: StaticString, ifWrongKind: StaticString) -> Unmanaged<T> {
    guard let handle else { clientBug(function, ifNull) }
    if kind != .queue {
        let direct = Unmanaged<DispatchObject>.fromOpaque(handle)
        if direct._withUnsafeGuaranteedRef({ $0.kind }) == kind { return unsafeBitCast(direct, to: Unmanaged<T>.self) }
        // No data symbol stands for an object of any other kind but data.
        if kind != .data { clientBug(function, ifWrongKind) }
        return unsafeBitCast(mappedObjectOutOfLine(handle, kind, function, ifWrongKind: ifWrongKind),
                             to: Unmanaged<T>.self)
    }
    return unsafeBitCast(mappedObject(handle, kind, function, ifWrongKind: ifWrongKind), to: Unmanaged<T>.self)
}

@inline(never)
func mappedObjectOutOfLine(_ handle: UnsafeMutableRawPointer, _ kind: ObjectKind, _ function: StaticString,
                           ifWrongKind: StaticString) -> Unmanaged<DispatchObject> {
    mappedObject(handle, kind, function, ifWrongKind: ifWrongKind)
}

/// `typedObject`'s general path: a data symbol mapped to its object, then the kind checked.
@inline(__always)
func mappedObject(_ handle: UnsafeMutableRawPointer, _ kind: ObjectKind, _ function: StaticString,
                  ifWrongKind: StaticString) -> Unmanaged<DispatchObject> {
    let o = objectFromHandle(handle)
    if o._withUnsafeGuaranteedRef({ $0.kind }) != kind { clientBug(function, ifWrongKind) }
    return o
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
func work(_ function: dispatch_function_t?, _ name: StaticString) -> dispatch_function_t {
    guard let function else { clientBug(name, "function is NULL") }
    return function
}

/// The flags word of the internal entry points the block shims call (`gc_*_flags_f`,
/// `gc_work_item_core_notify`; the bits are CGrandCentralKinds.h's GC_SUBMIT_*). They are
/// not libdispatch's names, so the version script keeps them out of the dynamic symbol table.
@inline(__always)
func submitFlags(_ raw: UInt) -> ContinuationFlags {
    raw & UInt(GC_SUBMIT_BARRIER) != 0 ? .barrier : []
}
