import CGrandCentral
import Glibc

// The run loop's hooks: what Foundation (CFRunLoop) and other event loops call to run the
// main queue and thread-bound queues on a thread they own. Declared in
// <dispatch/runloop_private.h>. On Linux libdispatch's "port" is an eventfd, and so is ours:
// the loop polls it, reads it when it is readable, then calls the callback or perform.

/// Foundation calls this early; GrandCentral sets itself up on first use, so it only makes
/// sure the main queue exists. Any number of calls, from any thread.
@_cdecl("libdispatch_init")
public func libdispatch_init() {
    _ = DispatchQueue.main
}

/// The main queue's run-loop descriptor: an eventfd that is readable while main-queue work
/// waits and the main thread is not parked in dispatch_main. The same descriptor every call.
@_cdecl("_dispatch_get_main_queue_handle_4CF")
public func _dispatch_get_main_queue_handle_4CF() -> Int32 {
    MainQueueDriver.runLoopHandle()
}

/// The same descriptor, under the name CFRunLoop uses on Linux (Darwin's is a Mach port).
@_cdecl("_dispatch_get_main_queue_port_4CF")
public func _dispatch_get_main_queue_port_4CF() -> Int32 {
    MainQueueDriver.runLoopHandle()
}

/// Runs the main queue's waiting items on the main thread, in order, each once, with the
/// main queue as the current queue. `message` is Darwin's Mach message; unused on Linux.
@_cdecl("_dispatch_main_queue_callback_4CF")
public func _dispatch_main_queue_callback_4CF(_ message: UnsafeMutableRawPointer?) {
    MainQueueDriver.runLoopDrain()
}

/// A serial queue that only the thread running a loop drains (see `RunLoopQueue`). `flags`
/// must be 0; anything else returns NULL, as libdispatch does.
@_cdecl("_dispatch_runloop_root_queue_create_4CF")
public func _dispatch_runloop_root_queue_create_4CF(_ label: UnsafePointer<CChar>?, _ flags: UInt) -> UnsafeMutableRawPointer? {
    if flags != 0 { return nil }
    guard let queue = RunLoopQueue(label: label) else {
        let line = "GrandCentral: _dispatch_runloop_root_queue_create_4CF: eventfd failed: \(String(cString: strerror(errno)))\n"
        line.withCString { gc_write_stderr($0) }
        abort()
    }
    return retainedHandle(queue)
}

@inline(__always)
func runLoopQueue(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> Unmanaged<RunLoopQueue> {
    let q = queue(handle, function)
    if q._withUnsafeGuaranteedRef({ $0.role }) != .runloop { clientBug(function, "not a run loop's queue") }
    return unsafeBitCast(q, to: Unmanaged<RunLoopQueue>.self)
}

/// Runs one item of a run loop's queue on the calling thread; true when more are waiting.
@_cdecl("_dispatch_runloop_root_queue_perform_4CF")
public func _dispatch_runloop_root_queue_perform_4CF(_ q: UnsafeMutableRawPointer?) -> Bool {
    let queue = runLoopQueue(q, "_dispatch_runloop_root_queue_perform_4CF").retain()
    defer { queue.release() }
    return queue._withUnsafeGuaranteedRef { $0.performOne() }
}

/// Makes a run loop's queue's descriptor readable, so its loop wakes up.
@_cdecl("_dispatch_runloop_root_queue_wakeup_4CF")
public func _dispatch_runloop_root_queue_wakeup_4CF(_ q: UnsafeMutableRawPointer?) {
    runLoopQueue(q, "_dispatch_runloop_root_queue_wakeup_4CF")._withUnsafeGuaranteedRef { $0.poke() }
}

/// The eventfd a run loop's queue makes readable when it has work. (The toolchain's
/// libdispatch builds this one for Darwin only; here it is the descriptor the other calls use.)
@_cdecl("_dispatch_runloop_root_queue_get_port_4CF")
public func _dispatch_runloop_root_queue_get_port_4CF(_ q: UnsafeMutableRawPointer?) -> Int32 {
    runLoopQueue(q, "_dispatch_runloop_root_queue_get_port_4CF")._withUnsafeGuaranteedRef { $0.descriptor }
}
