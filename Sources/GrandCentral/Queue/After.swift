import CGrandCentral

/// `dispatch_after_f`: the item waits in the event loop's timer heap, then is pushed onto
/// its queue (handlers never run on the event thread).
///
/// The timer's context is the continuation itself, with the queue (retained) in its
/// `owner` field until it fires. Leeway: libdispatch's default for dispatch_after is a
/// tenth of the delay, capped; we use the same rule, which lets the event loop coalesce
/// nearby deadlines into one wakeup.
extension DispatchQueue {
    final func after(_ when: UInt64, _ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                     _ flags: ContinuationFlags = []) {
        if when == ~0 { return }  // DISPATCH_TIME_FOREVER: never (libdispatch does the same)
        let delay = DispatchClock.nanosecondsUntil(when)
        if delay <= 0 {
            enqueue(function, context, flags)
            return
        }
        let node = ContinuationCache.make(function, context, flags)
        node.pointee.waiter = Unmanaged.passRetained(self).toOpaque()
        let leeway = min(UInt64(delay) / 10, 60_000_000_000)  // 10 %, at most 60 s
        _ = EventLoop.shared.scheduleTimer(deadline: when, leeway: leeway, fire: afterTimerFired, context: UnsafeMutableRawPointer(node))
    }
}

/// Runs on the event thread: hand the item to its queue.
let afterTimerFired: DispatchFunction = { raw in
    let node = raw!.assumingMemoryBound(to: gc_continuation_t.self)
    let queue = Unmanaged<DispatchQueue>.fromOpaque(node.pointee.waiter!)
    node.pointee.waiter = nil
    queue._withUnsafeGuaranteedRef { $0.push(node) }
    queue.release()
}
