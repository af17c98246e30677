import CGrandCentral

// dispatch_read and dispatch_write: one operation on a throwaway stream channel over the
// client's descriptor.
//
// What a read delivers. On a stream (pipe, socket, tty) the read waits for readiness,
// reads what is there up to `length`, and completes at the first EAGAIN after it has read
// something (libdispatch: "convenience read with available data completes on EAGAIN"): it
// never waits for `length` or end of file, so a read loop gets one delivery per chunk the
// writer wrote. On a regular file it reads up to `length` or end of file.
//
// Order. The operations on one descriptor are performed in call order, one at a time per
// direction, as if on one channel per descriptor: each direction of each descriptor has a
// line (`ConvenienceLine`); a call whose line is busy waits in it, and the operation ahead
// starts the next one when its channel has let go of the descriptor.
//
// The handler. It runs from the channel's cleanup, so by the time it is called the channel
// has let go of the descriptor (readiness registrations removed; flags restored, unless
// another channel still uses the descriptor) and the client may close it at once, as
// libdispatch promises.
//
// Rejected: libdispatch's one long-lived convenience channel per descriptor, whose
// handlers all wait until every operation on the descriptor is over (its close queue). A
// line of one-shot channels keeps the order and the promise about the descriptor, and
// calls each handler as soon as its own operation has let go, not when the last one has.

/// The outcome of the one operation, carried from its final call to the cleanup. Written
/// by the final call, read by the cleanup, which the channel runs after it. (A channel
/// that failed at creation calls its cleanup at once with the error, and then the cleanup
/// does not look here.) Holds one count of `data`.
private final class OneShotOutcome: @unchecked Sendable {
    var data: Unmanaged<DataObject>?
    var error: Int32 = 0

    deinit { data?.releaseData() }

    func record(_ data: Unmanaged<DataObject>?, _ error: Int32) {
        data?.retainData()
        self.data = data
        self.error = error
    }
}

/// The convenience operations of one direction of one descriptor that wait for the one
/// ahead of them. A line exists (in `lines`) while an operation of it is in flight.
///
/// A line is for one file under one number (`identity`, `gc_descriptor_identity`): a
/// client that closes a descriptor while a read on it waits for readiness leaves that read
/// pending for ever (its file is gone, no readiness will come), and a new file that gets
/// the number must not queue behind it.
private struct ConvenienceLine {
    struct Key: Hashable {
        let descriptor: Int32
        let identity: UInt64
        let isRead: Bool

        init(descriptor: Int32, isRead: Bool) {
            self.descriptor = descriptor
            identity = gc_descriptor_identity(descriptor)
            self.isRead = isRead
        }
    }

    /// Starts of the waiting operations, in call order, from `head` on.
    var waiting: [@Sendable () -> Void] = []
    var head = 0

    /// Every line with an operation in flight, under a spin lock held only to push or pop
    /// a start. (Not Synchronization.Mutex: its contended hand-off happens in the kernel,
    /// where ThreadSanitizer cannot see it, and TSan then reports races on the table.)
    final class Table: @unchecked Sendable {
        let lock = SpinLock()
        /// Guarded by `lock`.
        var lines: [Key: ConvenienceLine] = [:]

        func withLock<T>(_ body: (inout [Key: ConvenienceLine]) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body(&lines)
        }
    }

    static let lines = Table()

    /// Runs `start` now if the line is idle, else when the operations ahead have let go.
    static func enter(_ key: Key, _ start: @escaping @Sendable () -> Void) {
        let idle = lines.withLock { table -> Bool in
            if table[key] != nil {
                table[key]!.waiting.append(start)
                return false
            }
            table[key] = ConvenienceLine()
            return true
        }
        if idle { start() }
    }

    /// The operation in flight has let go of the descriptor: start the next one, or mark
    /// the line idle.
    static func leave(_ key: Key) {
        let next = lines.withLock { table -> (@Sendable () -> Void)? in
            guard var line = table[key] else { return nil }
            guard line.head < line.waiting.count else {
                table[key] = nil
                return nil
            }
            let start = line.waiting[line.head]
            line.head += 1
            if line.head == line.waiting.count {
                line.waiting.removeAll(keepingCapacity: true)
                line.head = 0
            }
            table[key] = line
            return start
        }
        next?()
    }
}

/// What the deferred start of a read needs (the client's synchronization covers the
/// handler).
private struct DeferredRead: @unchecked Sendable {
    let queue: DispatchQueue
    let handler: (Unmanaged<DataObject>, Int32) -> Void
}

/// What the deferred start of a write needs; `data` holds one count.
private struct DeferredWrite: @unchecked Sendable {
    let queue: DispatchQueue
    let handler: (Unmanaged<DataObject>?, Int32) -> Void
    let data: Unmanaged<DataObject>
}

extension IOChannel {
    /// Reads what is available up to `length` bytes (Int.max: no limit); `handler(data,
    /// error)` runs once on `queue`. See the top of the file.
    static func readAll(descriptor fd: Int32, length: Int, queue: DispatchQueue,
                        handler: @escaping (Unmanaged<DataObject>, Int32) -> Void) {
        let key = ConvenienceLine.Key(descriptor: fd, isRead: true)
        let captured = DeferredRead(queue: queue, handler: handler)
        ConvenienceLine.enter(key) {
            let queue = captured.queue, handler = captured.handler
            let outcome = OneShotOutcome()
            let channel = IOChannel(type: .stream, descriptor: IODescriptor.shared(descriptor: fd), cleanupQueue: queue) { error in
                if error != 0 { return handler(.passUnretained(DataObject.empty), error) }  // e.g. EBADF
                handler(outcome.data ?? .passUnretained(DataObject.empty), outcome.error)
            }
            channel.waitsForSharers = false
            channel.didLetGo = { ConvenienceLine.leave(key) }
            channel.setLowWater(Int.max)  // no partial calls: everything comes with `done`
            channel.submit(IOOperation.read(channel, offset: 0, length: length, queue: queue,
                                            completesWhenDrained: true) { done, data, error in
                if done { outcome.record(data, error) }
            })
            channel.close(stop: false)
        }
    }

    /// Writes all of `data` (borrowed); `handler(rest, error)` runs once on `queue` (rest is
    /// nil when everything was written, else what was not).
    static func writeAll(descriptor fd: Int32, data: Unmanaged<DataObject>, queue: DispatchQueue,
                         handler: @escaping (Unmanaged<DataObject>?, Int32) -> Void) {
        let key = ConvenienceLine.Key(descriptor: fd, isRead: false)
        data.retainData()  // released once the operation has taken its own count
        let captured = DeferredWrite(queue: queue, handler: handler, data: data)
        ConvenienceLine.enter(key) {
            let queue = captured.queue, handler = captured.handler, data = captured.data
            let outcome = OneShotOutcome()
            let channel = IOChannel(type: .stream, descriptor: IODescriptor.shared(descriptor: fd), cleanupQueue: queue) { error in
                if error != 0 { return handler(nil, error) }  // e.g. EBADF
                handler(outcome.data, outcome.error)
            }
            channel.waitsForSharers = false
            channel.didLetGo = { ConvenienceLine.leave(key) }
            channel.submit(IOOperation.write(channel, offset: 0, data: data, queue: queue) { done, rest, error in
                if done { outcome.record(rest, error) }
            })
            data.releaseData()
            channel.close(stop: false)
        }
    }
}
