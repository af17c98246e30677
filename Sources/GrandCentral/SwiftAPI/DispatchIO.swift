import Glibc

// The Swift face of I/O channels, spelled like Swift's Dispatch `DispatchIO`. A DispatchIO
// is a small object over an engine channel (IO/IOChannel.swift); when it goes away the
// channel is closed (operations in flight finish, then the cleanup handler runs), as
// releasing a dispatch_io_t does.

/// An I/O channel: reads and writes a file descriptor asynchronously.
public class DispatchIO: DispatchObject, @unchecked Sendable {
    /// How a channel accesses its descriptor.
    public enum StreamType: UInt {
        /// Sequential, at the descriptor's position.
        case stream = 0
        /// At offsets, with pread/pwrite; the position never moves.
        case random = 1

        var channelType: IOChannelType { self == .stream ? .stream : .random }
    }

    /// Options for `close(flags:)`.
    public struct CloseFlags: OptionSet, RawRepresentable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Cancel outstanding operations (they report ECANCELED).
        public static let stop = CloseFlags(rawValue: 1)
    }

    /// Options for `setInterval(interval:flags:)`.
    public struct IntervalFlags: OptionSet, RawRepresentable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public init(nilLiteral: ()) { self.rawValue = 0 }
        /// Deliver at each interval even below the low water mark.
        public static let strictInterval = IntervalFlags(rawValue: 1)
    }

    let channel: IOChannel

    init(channel: IOChannel) {
        self.channel = channel
        super.init(kind: .io)
    }

    deinit {
        channel.close(stop: false)
    }


    /// A channel over `fileDescriptor`, which it owns until `cleanupHandler` has run on `queue`.
    public convenience init(type: StreamType, fileDescriptor: Int32, queue: DispatchQueue,
                            cleanupHandler: @escaping (_ error: Int32) -> Void) {
        self.init(channel: IOChannel(type: type.channelType, descriptor: IODescriptor.shared(descriptor: fileDescriptor),
                                     cleanupQueue: queue, cleanupHandler: cleanupHandler))
    }

    /// A channel that opens `path` at its first operation; the path is checked now (a
    /// failure is the channel's error: see `init?(type:path:oflag:mode:queue:cleanupHandler:)`).
    @available(swift, obsoleted: 4)
    public convenience init(type: StreamType, path: UnsafePointer<Int8>, oflag: Int32, mode: mode_t,
                            queue: DispatchQueue, cleanupHandler: @escaping (_ error: Int32) -> Void) {
        self.init(channel: IOChannel(type: type.channelType,
                                     descriptor: IODescriptor(path: path, oflag: oflag, mode: UInt32(mode),
                                                              random: type == .random),
                                     cleanupQueue: queue, cleanupHandler: cleanupHandler))
    }

    /// A channel that opens `path` at its first operation; nil for a relative path. The path
    /// is checked now (stat; lstat with O_NOFOLLOW; the parent directory with O_CREAT): a
    /// failure is the channel's error, which every operation reports and the cleanup handler
    /// gets at once. A failure of the open(2) itself is reported by the operations, and the
    /// cleanup handler then gets 0.
    @available(swift, introduced: 4)
    public convenience init?(type: StreamType, path: UnsafePointer<Int8>, oflag: Int32, mode: mode_t,
                             queue: DispatchQueue, cleanupHandler: @escaping (_ error: Int32) -> Void) {
        guard path.pointee == 0x2F /* '/' */ else { return nil }
        self.init(channel: IOChannel(type: type.channelType,
                                     descriptor: IODescriptor(path: path, oflag: oflag, mode: UInt32(mode),
                                                              random: type == .random),
                                     cleanupQueue: queue, cleanupHandler: cleanupHandler))
    }

    /// A channel of `type` over the same descriptor as `io`; once `io` is closed, a channel
    /// whose operations and cleanup handler get ECANCELED (as in libdispatch).
    public convenience init(type: StreamType, io: DispatchIO, queue: DispatchQueue,
                            cleanupHandler: @escaping (_ error: Int32) -> Void) {
        let descriptor = io.channel.descriptorForNewChannel() ?? IODescriptor(failed: ECANCELED)
        self.init(channel: IOChannel(type: type.channelType, descriptor: descriptor, cleanupQueue: queue,
                                     cleanupHandler: cleanupHandler))
    }

    /// Reads from `fileDescriptor` and runs `handler` once: on a pipe or socket, what is
    /// there once it is readable (up to `maxLength`; it does not wait for more); on a file,
    /// up to `maxLength` bytes or end of file. Calls on one descriptor run in call order,
    /// one at a time per direction; the handler may close the descriptor.
    public class func read(fromFileDescriptor: Int32, maxLength: Int, runningHandlerOn queue: DispatchQueue,
                           handler: @escaping (_ data: DispatchData, _ error: Int32) -> Void) {
        IOChannel.readAll(descriptor: fromFileDescriptor, length: maxLength, queue: queue) { data, error in
            data.retainData()
            handler(DispatchData(owning: data), error)
        }
    }

    /// Writes all of `data` to `toFileDescriptor`; `handler` runs once (nil data: all
    /// written). Writes on one descriptor are performed in call order.
    public class func write(toFileDescriptor: Int32, data: DispatchData, runningHandlerOn queue: DispatchQueue,
                            handler: @escaping (_ data: DispatchData?, _ error: Int32) -> Void) {
        IOChannel.writeAll(descriptor: toFileDescriptor, data: data.reference.object, queue: queue) { rest, error in
            rest?.retainData()
            handler(rest.map { DispatchData(owning: $0) }, error)
        }
    }

    /// Reads `length` bytes (Int.max: to end of file) at `offset` (random channels).
    public func read(offset: off_t, length: Int, queue: DispatchQueue,
                     ioHandler: @escaping (_ done: Bool, _ data: DispatchData?, _ error: Int32) -> Void) {
        channel.submit(IOOperation.read(channel, offset: Int64(offset), length: max(length, 0), queue: queue) { done, data, error in
            data?.retainData()
            ioHandler(done, data.map { DispatchData(owning: $0) }, error)
        })
    }

    /// Writes `data` at `offset` (random channels).
    public func write(offset: off_t, data: DispatchData, queue: DispatchQueue,
                      ioHandler: @escaping (_ done: Bool, _ data: DispatchData?, _ error: Int32) -> Void) {
        channel.submit(IOOperation.write(channel, offset: Int64(offset), data: data.reference.object, queue: queue) { done, rest, error in
            rest?.retainData()
            ioHandler(done, rest.map { DispatchData(owning: $0) }, error)
        })
    }

    /// Sets the interval between partial results.
    public func setInterval(interval: DispatchTimeInterval, flags: IntervalFlags = []) {
        let ns = interval.nanosecondCount
        channel.setInterval(ns <= 0 ? 0 : UInt64(ns), strict: flags.contains(.strictInterval))
    }

    /// Closes the channel (with `.stop`, cancelling outstanding operations).
    public func close(flags: CloseFlags = []) {
        channel.close(stop: flags.contains(.stop))
    }

    /// Runs `execute` once earlier operations have finished, before later ones start.
    public func barrier(execute: @escaping () -> Void) {
        channel.barrier(execute)
    }

    /// The descriptor (-1 before a path channel opened it and after close).
    public var fileDescriptor: Int32 { channel.currentDescriptor }

    /// Most bytes per partial result.
    public func setLimit(highWater: Int) { channel.setHighWater(highWater) }

    /// Fewest bytes per partial result.
    public func setLimit(lowWater: Int) { channel.setLowWater(lowWater) }
}
