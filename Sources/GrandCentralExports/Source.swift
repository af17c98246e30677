import CGrandCentral
import Glibc

// Sources (source.h).

/// `dispatch_source_type_t` handles are the addresses of libdispatch's
/// `_dispatch_source_type_*` data symbols, which GrandCentralBlocks defines
/// (data_symbols.c) as `{ GC_SOURCE_TYPE_MAGIC, kind }`: the kind is a SourceType
/// (CGrandCentralKinds.h). An address without the magic is not a source type, and
/// `dispatch_source_create` returns NULL for it.
@inline(__always)
func source(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<SourceCore> {
    typedObject(handle, .source, function, ifNull: "source is NULL", ifWrongKind: "object is not a source")
}

@_cdecl("dispatch_source_create")
public func dispatch_source_create(_ type: UnsafeRawPointer?, _ handle: UInt, _ mask: UInt,
                                   _ q: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let type, type.load(as: UInt32.self) == GC_SOURCE_TYPE_MAGIC,
          let kind = SourceType(rawValue: type.load(fromByteOffset: 4, as: UInt32.self)) else { return nil }
    let target = q.map { queue($0, "dispatch_source_create").takeUnretainedValue() }
    guard let made = SourceCore.make(type: kind, handle: handle, mask: mask, queue: target) else { return nil }
    if kind == .interval {
        made.setIntervalTimer(start: DispatchClock.now, interval: UInt64(handle), leeway: ~0,
                              caller: "dispatch_source_create")
    }
    return retainedHandle(made)
}

/// A source with a mandatory cancel handler keeps its handlers from activation on; changing
/// one afterwards is a client bug, as in libdispatch (which also makes setting a mandatory
/// cancel handler on an active source one).
@inline(__always)
private func checkHandlersMutable(_ core: SourceCore, _ name: StaticString) {
    if core.hasMandatoryCancel.load(ordering: .relaxed)
        && !SourceState(core.state.load(ordering: .acquiring)).has(SourceState.inactive) {
        clientBug(name, "cannot change a handler of a source with a mandatory cancel handler after activation")
    }
}

/// Every handler setter, `_f` and block: marks a mandatory cancel handler first (so that
/// setting one on an active source is the bug above), then checks and sets.
@inline(__always)
private func setHandler(_ s: UnsafeMutableRawPointer?, _ kind: SourceHandlerKind, mandatory: Bool = false,
                        _ handler: SourceHandler?, _ name: StaticString) {
    source(s, name)._withUnsafeGuaranteedRef { core in
        if mandatory { core.hasMandatoryCancel.store(true, ordering: .relaxed) }
        checkHandlersMutable(core, name)
        core.setHandler(kind, handler)
    }
}

@inline(__always)
private func setFunctionHandler(_ s: UnsafeMutableRawPointer?, _ kind: SourceHandlerKind, mandatory: Bool = false,
                                _ function: dispatch_function_t?, _ name: StaticString) {
    setHandler(s, kind, mandatory: mandatory, function.map {
        SourceHandler(function: $0, context: nil, usesSourceContext: true, dispose: nil)
    }, name)
}

@_cdecl("dispatch_source_set_event_handler_f")
public func dispatch_source_set_event_handler_f(_ s: UnsafeMutableRawPointer?, _ handler: dispatch_function_t?) {
    setFunctionHandler(s, .event, handler, "dispatch_source_set_event_handler_f")
}

@_cdecl("dispatch_source_set_cancel_handler_f")
public func dispatch_source_set_cancel_handler_f(_ s: UnsafeMutableRawPointer?, _ handler: dispatch_function_t?) {
    setFunctionHandler(s, .cancel, handler, "dispatch_source_set_cancel_handler_f")
}

@_cdecl("dispatch_source_set_registration_handler_f")
public func dispatch_source_set_registration_handler_f(_ s: UnsafeMutableRawPointer?, _ handler: dispatch_function_t?) {
    setFunctionHandler(s, .registration, handler, "dispatch_source_set_registration_handler_f")
}

/// The block setters' entry point (GrandCentralBlocks/source.c): `block` is a copy the
/// source owns, run by `invoke` and released by `dispose` when the handler is replaced or
/// dropped; NULL `block` clears the handler. `mandatory`: dispatch_source_set_mandatory_cancel_handler.
/// Local to the library (the version script).
@_cdecl("gc_source_set_block_handler")
public func gc_source_set_block_handler(_ s: UnsafeMutableRawPointer?, _ kind: UInt32, _ mandatory: Bool,
                                        _ block: UnsafeMutableRawPointer?,
                                        _ invoke: dispatch_function_t, _ dispose: dispatch_function_t) {
    let handlerKind = SourceHandlerKind(rawValue: kind)!
    let name: StaticString
    switch handlerKind {
    case .event: name = "dispatch_source_set_event_handler"
    case .cancel: name = mandatory ? "dispatch_source_set_mandatory_cancel_handler" : "dispatch_source_set_cancel_handler"
    case .registration: name = "dispatch_source_set_registration_handler"
    }
    setHandler(s, handlerKind, mandatory: mandatory, block.map {
        SourceHandler(function: invoke, context: $0, usesSourceContext: false, dispose: dispose)
    }, name)
}

@_cdecl("dispatch_source_cancel")
public func dispatch_source_cancel(_ s: UnsafeMutableRawPointer?) {
    source(s, "dispatch_source_cancel")._withUnsafeGuaranteedRef { $0.cancel() }
}

@_cdecl("dispatch_source_testcancel")
public func dispatch_source_testcancel(_ s: UnsafeMutableRawPointer?) -> Int {
    source(s, "dispatch_source_testcancel")._withUnsafeGuaranteedRef { $0.isCancelled ? 1 : 0 }
}

@_cdecl("dispatch_source_get_handle")
public func dispatch_source_get_handle(_ s: UnsafeMutableRawPointer?) -> UInt {
    source(s, "dispatch_source_get_handle")._withUnsafeGuaranteedRef {
        $0.type == .interval ? SourceCore.intervalHandle : $0.handle
    }
}

@_cdecl("dispatch_source_get_mask")
public func dispatch_source_get_mask(_ s: UnsafeMutableRawPointer?) -> UInt {
    source(s, "dispatch_source_get_mask")._withUnsafeGuaranteedRef {
        $0.type == .interval ? $0.mask | SourceCore.intervalMaskFlag : $0.mask
    }
}

@_cdecl("dispatch_source_get_data")
public func dispatch_source_get_data(_ s: UnsafeMutableRawPointer?) -> UInt {
    source(s, "dispatch_source_get_data")._withUnsafeGuaranteedRef { $0.deliveredData.load(ordering: .acquiring) }
}

@_cdecl("dispatch_source_merge_data")
public func dispatch_source_merge_data(_ s: UnsafeMutableRawPointer?, _ value: UInt) {
    source(s, "dispatch_source_merge_data")._withUnsafeGuaranteedRef { $0.mergeData(value) }
}

@_cdecl("dispatch_source_set_timer")
public func dispatch_source_set_timer(_ s: UnsafeMutableRawPointer?, _ start: UInt64, _ interval: UInt64, _ leeway: UInt64) {
    source(s, "dispatch_source_set_timer")._withUnsafeGuaranteedRef {
        if $0.type == .interval {
            $0.setIntervalTimer(start: start, interval: interval, leeway: leeway, caller: "dispatch_source_set_timer")
        } else {
            $0.setTimer(start: start, interval: interval, leeway: leeway, caller: "dispatch_source_set_timer")
        }
    }
}

// MARK: Private calls (private.h)

@_cdecl("dispatch_source_cancel_and_wait")
public func dispatch_source_cancel_and_wait(_ s: UnsafeMutableRawPointer?) {
    source(s, "dispatch_source_cancel_and_wait")._withUnsafeGuaranteedRef {
        $0.cancelAndWait(caller: "dispatch_source_cancel_and_wait")
    }
}

/// `struct dispatch_source_extended_data_s { unsigned long data, status; }`. No source
/// kind on Linux has an extended status (libdispatch's are Mach and kevent ones), so
/// status is 0. As libdispatch: fields that fit in `size` are written, bytes past the
/// struct are zeroed, and the result is min(size, sizeof(struct)).
@_cdecl("dispatch_source_get_extended_data")
public func dispatch_source_get_extended_data(_ s: UnsafeMutableRawPointer?, _ edata: UnsafeMutableRawPointer?,
                                              _ size: Int) -> Int {
    let data = source(s, "dispatch_source_get_extended_data")._withUnsafeGuaranteedRef {
        $0.deliveredData.load(ordering: .acquiring)
    }
    let word = MemoryLayout<UInt>.size
    guard size > 0 else { return 0 }
    guard let edata else { clientBug("dispatch_source_get_extended_data", "edata is NULL") }
    if size >= word { edata.storeBytes(of: data, as: UInt.self) }
    if size >= 2 * word { edata.storeBytes(of: 0, toByteOffset: word, as: UInt.self) }
    if size > 2 * word { memset(edata + 2 * word, 0, size - 2 * word) }
    return min(size, 2 * word)
}

@_cdecl("dispatch_source_set_mandatory_cancel_handler_f")
public func dispatch_source_set_mandatory_cancel_handler_f(_ s: UnsafeMutableRawPointer?,
                                                           _ handler: dispatch_function_t?) {
    setFunctionHandler(s, .cancel, mandatory: true, handler, "dispatch_source_set_mandatory_cancel_handler_f")
}

