// dispatch_read and dispatch_write: one operation on a throwaway stream channel over the
// client's descriptor, whose single handler call carries everything. The channel restores
// the descriptor's flags when it is done and never closes it.

extension IOChannel {
    /// Reads up to `length` bytes (Int.max: to end of file); `handler(data, error)` runs
    /// once on `queue` with all of it.
    static func readAll(descriptor fd: Int32, length: Int, queue: DispatchQueue,
                        handler: @escaping (Unmanaged<DataObject>, Int32) -> Void) {
        let channel = IOChannel(type: .stream, descriptor: IODescriptor(descriptor: fd), cleanupQueue: nil,
                                cleanupHandler: nil)
        channel.setLowWater(Int.max)  // no partial calls: everything comes with `done`
        channel.submit(IOOperation.read(channel, offset: 0, length: length, queue: queue) { done, data, error in
            if done { handler(data ?? .passUnretained(DataObject.empty), error) }
        })
        channel.close(stop: false)
    }

    /// Writes all of `data`; `handler(rest, error)` runs once on `queue` (rest is nil when
    /// everything was written, else what was not).
    static func writeAll(descriptor fd: Int32, data: Unmanaged<DataObject>, queue: DispatchQueue,
                         handler: @escaping (Unmanaged<DataObject>?, Int32) -> Void) {
        let channel = IOChannel(type: .stream, descriptor: IODescriptor(descriptor: fd), cleanupQueue: nil,
                                cleanupHandler: nil)
        channel.submit(IOOperation.write(channel, offset: 0, data: data, queue: queue) { done, rest, error in
            if done { handler(rest, error) }
        })
        channel.close(stop: false)
    }
}
