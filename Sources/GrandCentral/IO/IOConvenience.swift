// dispatch_read and dispatch_write: one operation on a throwaway stream channel over the
// client's descriptor. The client's handler runs from the channel's cleanup, so by the time
// it is called the channel has let go of the descriptor (readiness registrations removed,
// flags restored) and the client may close it at once, as libdispatch promises.

/// The outcome of the one operation, carried from its final call to the cleanup. Written
/// by the final call, read by the cleanup, which the channel runs after it.
private final class OneShotOutcome: @unchecked Sendable {
    var data: Unmanaged<DataObject>?
    var error: Int32 = 0

    func record(_ data: Unmanaged<DataObject>?, _ error: Int32) {
        data?.retainData()
        self.data = data
        self.error = error
    }
}

extension IOChannel {
    /// Reads up to `length` bytes (Int.max: to end of file); `handler(data, error)` runs
    /// once on `queue` with all of it.
    static func readAll(descriptor fd: Int32, length: Int, queue: DispatchQueue,
                        handler: @escaping (Unmanaged<DataObject>, Int32) -> Void) {
        let outcome = OneShotOutcome()
        let channel = IOChannel(type: .stream, descriptor: IODescriptor.shared(descriptor: fd), cleanupQueue: queue) { _ in
            handler(outcome.data ?? .passUnretained(DataObject.empty), outcome.error)
            outcome.data?.releaseData()
        }
        channel.waitsForSharers = false
        channel.setLowWater(Int.max)  // no partial calls: everything comes with `done`
        channel.submit(IOOperation.read(channel, offset: 0, length: length, queue: queue) { done, data, error in
            if done { outcome.record(data, error) }
        })
        channel.close(stop: false)
    }

    /// Writes all of `data`; `handler(rest, error)` runs once on `queue` (rest is nil when
    /// everything was written, else what was not).
    static func writeAll(descriptor fd: Int32, data: Unmanaged<DataObject>, queue: DispatchQueue,
                         handler: @escaping (Unmanaged<DataObject>?, Int32) -> Void) {
        let outcome = OneShotOutcome()
        let channel = IOChannel(type: .stream, descriptor: IODescriptor.shared(descriptor: fd), cleanupQueue: queue) { _ in
            handler(outcome.data, outcome.error)
            outcome.data?.releaseData()
        }
        channel.waitsForSharers = false
        channel.submit(IOOperation.write(channel, offset: 0, data: data, queue: queue) { done, rest, error in
            if done { outcome.record(rest, error) }
        })
        channel.close(stop: false)
    }
}
