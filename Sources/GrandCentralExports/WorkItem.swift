import CGrandCentral

// The work-item blocks' calls into the engine (GrandCentralBlocks/work_item.c). Each block
// made by dispatch_block_create holds one retained WorkItemCore (Runtime/WorkItemCore.swift),
// which has every rule; these only convert. Not libdispatch's names, so cmake/exports.map
// keeps them local to the library.

@inline(__always)
private func core(_ raw: UnsafeMutableRawPointer) -> Unmanaged<WorkItemCore> {
    Unmanaged<WorkItemCore>.fromOpaque(raw)
}

/// A new core, retained once for the block that will hold it.
@_cdecl("gc_work_item_core_create")
public func gc_work_item_core_create() -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(WorkItemCore()).toOpaque()
}

/// The block's dispose: drops its reference (the last one finishes an item that never ran).
@_cdecl("gc_work_item_core_release")
public func gc_work_item_core_release(_ raw: UnsafeMutableRawPointer) {
    core(raw).release()
}

/// One invocation of the block: `function(context)` runs the client's block.
@_cdecl("gc_work_item_core_run")
public func gc_work_item_core_run(_ raw: UnsafeMutableRawPointer, _ function: dispatch_function_t,
                                  _ context: UnsafeMutableRawPointer?) {
    core(raw)._withUnsafeGuaranteedRef { $0.run(function, context, caller: "dispatch_block_wait") }
}

/// dispatch_block_wait: 0 when the item finished, non-zero on timeout.
@_cdecl("gc_work_item_core_wait")
public func gc_work_item_core_wait(_ raw: UnsafeMutableRawPointer, _ timeout: UInt64) -> Int {
    core(raw)._withUnsafeGuaranteedRef {
        $0.wait(timeoutNanoseconds: DispatchClock.nanosecondsUntil(timeout), caller: "dispatch_block_wait") ? 0 : 1
    }
}

/// dispatch_block_notify: `function(context)` on queue `q` once the item has finished.
@_cdecl("gc_work_item_core_notify")
public func gc_work_item_core_notify(_ raw: UnsafeMutableRawPointer, _ q: UnsafeMutableRawPointer?,
                                     _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?,
                                     _ flags: UInt) {
    let f = work(function, "dispatch_block_notify")
    let target = queue(q, "dispatch_block_notify").takeUnretainedValue()
    core(raw)._withUnsafeGuaranteedRef { $0.notify(queue: target, function: f, context: context, flags: submitFlags(flags)) }
}

@_cdecl("gc_work_item_core_cancel")
public func gc_work_item_core_cancel(_ raw: UnsafeMutableRawPointer) {
    core(raw)._withUnsafeGuaranteedRef { $0.cancel() }
}

@_cdecl("gc_work_item_core_testcancel")
public func gc_work_item_core_testcancel(_ raw: UnsafeMutableRawPointer) -> Int {
    core(raw)._withUnsafeGuaranteedRef { $0.isCancelled } ? 1 : 0
}
