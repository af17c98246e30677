import CGrandCentral

/// The queues the current thread is inside of — draining, running a redirected item of, or
/// holding for a `dispatch_sync` — innermost first: what `dispatch_get_current_queue`,
/// `dispatch_get_specific` and `dispatch_assert_queue` consult, and how a `dispatch_sync`
/// that would deadlock is caught.
///
/// A linked list of `gc_held_frame_t` frames on the threads' own stacks (CGrandCentral.h),
/// headed by the thread's `gc_thread_t.held`; only that thread touches it. So it is as deep
/// as the program nests (a thousand nested syncs answer correctly) and entering a queue
/// costs two stores. Frames hold unretained queue pointers (a queue is alive while a thread
/// is inside it) whose low bit is set when the thread holds the queue exclusively: its
/// drain lock (a serial queue's drain, a concurrent queue's dispatcher or barrier, an
/// exclusive sync), as opposed to one unit of a concurrent queue's width.
///
/// The main thread counts as being on the main queue wherever it is (see `isCurrent`); that
/// needs no frame.
enum HeldQueues {
    @inline(__always)
    static func encode(_ queue: DispatchQueue, exclusive: Bool) -> UnsafeMutableRawPointer {
        let raw = UInt(bitPattern: Unmanaged.passUnretained(queue).toOpaque()) | (exclusive ? 1 : 0)
        return UnsafeMutableRawPointer(bitPattern: raw)!
    }

    @inline(__always)
    static func decode(_ raw: UnsafeMutableRawPointer) -> (queue: DispatchQueue, exclusive: Bool) {
        let bits = UInt(bitPattern: raw)
        let queue = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~1)!).takeUnretainedValue()
        return (queue, bits & 1 != 0)
    }

    /// Runs `body` with `queue` as the innermost held queue.
    @inline(__always)
    static func entering<T>(_ queue: DispatchQueue, exclusive: Bool, _ body: () throws -> T) rethrows -> T {
        var frame = gc_held_frame_t(outer: nil, queue: encode(queue, exclusive: exclusive))
        return try withUnsafeMutablePointer(to: &frame) { pointer in
            gc_held_enter(pointer)
            defer { gc_held_leave(pointer) }
            return try body()
        }
    }

    /// The innermost queue, or nil outside any queue.
    static var current: DispatchQueue? {
        guard let top = gc_held_top() else { return nil }
        return decode(top.pointee.queue).queue
    }

    /// Calls `body` for every held queue (and whether it is held exclusively), innermost
    /// first; stops and returns true when it returns true.
    static func contains(where body: (DispatchQueue, Bool) -> Bool) -> Bool {
        var frame = gc_held_top()
        while let f = frame {
            let (queue, exclusive) = decode(f.pointee.queue)
            if body(queue, exclusive) { return true }
            frame = f.pointee.outer
        }
        return false
    }
}
