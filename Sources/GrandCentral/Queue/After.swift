import CGrandCentral

/// `dispatch_after_f`: the item waits in the event loop's timer heap, then is pushed onto
/// its queue (handlers never run on the event thread).
///
/// The timer's context is the continuation itself, with the queue (retained) in its
/// `slot.after_queue` until it fires. Leeway: libdispatch's default for dispatch_after is a
/// tenth of the delay, capped; we use the same rule. Leeway never delays a timer that has
/// nothing to coalesce with (the timer policy, see `TimerHeap`): it only lets nearby
/// deadlines share one wakeup of the event thread. A `dispatch_after` is a one-shot timer:
/// its node is armed once and fires once (timer sources re-arm theirs), then goes back to
/// the event loop's pool of one-shot nodes for the next `dispatch_after`.
extension DispatchQueue {
    /// `loop` is for tests, which count a private loop's wakeups; the library uses the
    /// shared one.
    final func after(_ when: UInt64, _ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                     _ flags: ContinuationFlags = [], on loop: EventLoop = .shared) {
        if when == ~0 { return }  // DISPATCH_TIME_FOREVER: never (libdispatch does the same)
        let delay = DispatchClock.nanosecondsUntil(when)
        if delay <= 0 {
            enqueue(function, context, flags)
            return
        }
        let node = ContinuationCache.make(function, context, flags)
        node.pointee.slot.after_queue = Unmanaged.passRetained(self).toOpaque()
        let leeway = min(UInt64(delay) / 10, 60_000_000_000)  // 10 %, at most 60 s
        loop.scheduleOneShot(deadline: when, leeway: leeway, fire: afterTimerFired, context: UnsafeMutableRawPointer(node))
    }
}

/// Runs on the event thread: hand the item to its queue.
let afterTimerFired: DispatchFunction = { raw in
    let node = raw!.assumingMemoryBound(to: gc_continuation_t.self)
    let queue = Unmanaged<DispatchQueue>.fromOpaque(node.pointee.slot.after_queue!)
    node.pointee.slot.after_queue = nil
    queue._withUnsafeGuaranteedRef { $0.push(node) }
    queue.release()
}
