import CGrandCentral

// The work-item blocks' calls into the engine (GrandCentralBlocks/work_item.c). Each block
// made by dispatch_block_create holds one retained WorkItemCoreBox (Runtime/WorkItemCore.swift),
// whose core has every rule; these only convert. Not libdispatch's names, so cmake/exports.map
// keeps them local to the library.

@inline(__always)
private func box(_ raw: UnsafeMutableRawPointer) -> Unmanaged<WorkItemCoreBox> {
    Unmanaged<WorkItemCoreBox>.fromOpaque(raw)
}

/// A new core, retained once for the block that will hold it.
@_cdecl("gc_work_item_core_create")
public func gc_work_item_core_create() -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(WorkItemCoreBox()).toOpaque()
}

/// The block's dispose: drops its reference (the last one finishes an item that never ran).
@_cdecl("gc_work_item_core_release")
public func gc_work_item_core_release(_ raw: UnsafeMutableRawPointer) {
    box(raw).release()
}

/// One invocation of the block: `function(context)` runs the client's block.
@_cdecl("gc_work_item_core_run")
public func gc_work_item_core_run(_ raw: UnsafeMutableRawPointer, _ function: dispatch_function_t,
                                  _ context: UnsafeMutableRawPointer?) {
    box(raw)._withUnsafeGuaranteedRef { $0.core.run(function, context, caller: "dispatch_block_wait") }
}

/// dispatch_block_wait: 0 when the item finished, non-zero on timeout.
@_cdecl("gc_work_item_core_wait")
public func gc_work_item_core_wait(_ raw: UnsafeMutableRawPointer, _ timeout: UInt64) -> Int {
    box(raw)._withUnsafeGuaranteedRef {
        $0.core.wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout), caller: "dispatch_block_wait") ? 0 : 1
    }
}

/// dispatch_block_notify: `function(context)` on queue `q` once the item has finished.
@_cdecl("gc_work_item_core_notify")
public func gc_work_item_core_notify(_ raw: UnsafeMutableRawPointer, _ q: UnsafeMutableRawPointer?,
                                     _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?,
                                     _ flags: UInt) {
    let f = work(function, "dispatch_block_notify")
    let target = queue(q, "dispatch_block_notify").takeUnretainedValue()
    box(raw)._withUnsafeGuaranteedRef { $0.core.notify(queue: target, function: f, context: context, flags: submitFlags(flags)) }
}

@_cdecl("gc_work_item_core_cancel")
public func gc_work_item_core_cancel(_ raw: UnsafeMutableRawPointer) {
    box(raw)._withUnsafeGuaranteedRef { $0.core.cancel() }
}

@_cdecl("gc_work_item_core_testcancel")
public func gc_work_item_core_testcancel(_ raw: UnsafeMutableRawPointer) -> Int {
    box(raw)._withUnsafeGuaranteedRef { $0.core.isCancelled } ? 1 : 0
}
