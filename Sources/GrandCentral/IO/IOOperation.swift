import CGrandCentral
import Glibc
import Synchronization

// One read or write on a channel, and the loops that do its I/O.
//
// Where the I/O runs. A regular file is read or written on a pool thread, one system call
// at a time inside BlockingRegion.enter()/leave() (the pool starts a replacement while the
// disk is slow). A stream (pipe, socket, tty) is non-blocking: the operation reads or
// writes on a pool thread until EAGAIN, then asks the channel to arm its readiness
// registration and returns; the event thread's report runs it again on a pool thread. No
// thread is ever parked in read(2) or write(2) on a stream.
//
// Delivery. A read collects what it reads in `pending` and hands it to the handler in
// partial calls (never more than the high water mark; at least the low water mark, unless
// the interval is strict) and then one final call with `done`, carrying what is left and
// the error (0 at end of file or when the length is reached). A write goes out in pieces of
// at most the high water mark; each time at least `IOSettings.writeProgressStep` bytes
// have gone out and data is left, it makes a partial call carrying the data not yet
// written (libdispatch's progress report); then one final call: done, no data on success,
// the unwritten rest and the error on failure. Calls are made on a serial queue targeting
// the client's queue, so one operation's calls run in order.
//
// Fields: the immutable ones are set at init. `state` is guarded by the descriptor's schedule lock
// (see IOChannel). `cancelled` is atomic (set by close(STOP), polled by the running loop).
// `offset`, `remaining`, `written`, `pending`, `lastDelivery` belong to the thread running
// the operation: one at a time, handed over through the channel's lock or a queue.

final class IOOperation: @unchecked Sendable {
    enum State {
        /// Submitted, waiting for its turn.
        case queued
        /// A thread does (or is about to do) its I/O.
        case running
        /// A stream operation waiting for readiness; no thread holds it.
        case waiting
        /// Its final handler call is enqueued.
        case finished
    }

    let channel: IOChannel
    let isRead: Bool
    private let handler: IOHandlerBody
    /// Serial: the client's queue, or a serial queue targeting it.
    private let handlerQueue: DispatchQueue
    private let settings: IOSettings
    /// Write: the data (one count), else nil.
    private let data: Unmanaged<DataObject>?
    /// A stream read that completes at the first EAGAIN after it has read something
    /// (dispatch_read: what is available, not `length`).
    private let completesWhenDrained: Bool

    var state = State.queued
    let cancelled = Atomic<Bool>(false)

    private var offset: Int64
    /// Bytes still to read (Int.max: to end of file). Write: unused.
    private var remaining: Int
    /// Write: bytes written so far, and those written since the last progress report.
    private var written = 0
    private var unreported = 0
    /// Read: bytes read but not yet delivered (one count), and their size.
    private var pending: Unmanaged<DataObject>?
    private var pendingSize = 0
    /// Read: bytes read so far, delivered or not.
    private var totalRead = 0
    private var lastDelivery: UInt64 = 0

    /// The descriptor while running.
    private var fd: Int32 = -1
    private var descriptorKind = IODescriptorKind.file

    private init(channel: IOChannel, isRead: Bool, offset: Int64, length: Int, data: Unmanaged<DataObject>?,
                 completesWhenDrained: Bool = false, queue: DispatchQueue, handler: @escaping IOHandlerBody) {
        self.channel = channel
        self.completesWhenDrained = completesWhenDrained
        self.isRead = isRead
        // A random channel's offsets count from the file position at its creation.
        self.offset = channel.type == .random ? offset &+ channel.basePosition : offset
        self.remaining = length
        self.data = data
        self.handler = handler
        self.handlerQueue = queue.isSerial
            ? queue : DispatchQueue.make(label: nil, attributes: .serial, target: queue)
        self.settings = channel.schedule.lock.withLock { channel.settings }
    }

    deinit {
        data?.releaseData()
        pending?.releaseData()
    }

    /// A read of `length` bytes (Int.max: to end of file) at `offset` (random channels).
    /// `completesWhenDrained`: on a stream, complete at the first EAGAIN after reading
    /// something (dispatch_read).
    static func read(_ channel: IOChannel, offset: Int64, length: Int, queue: DispatchQueue,
                     completesWhenDrained: Bool = false, handler: @escaping IOHandlerBody) -> IOOperation {
        IOOperation(channel: channel, isRead: true, offset: offset, length: length, data: nil,
                    completesWhenDrained: completesWhenDrained, queue: queue, handler: handler)
    }

    /// A write of `data` (borrowed; the operation takes its own count) at `offset`.
    static func write(_ channel: IOChannel, offset: Int64, data: Unmanaged<DataObject>, queue: DispatchQueue,
                      handler: @escaping IOHandlerBody) -> IOOperation {
        data.retainData()
        return IOOperation(channel: channel, isRead: false, offset: offset, length: 0, data: data,
                           queue: queue, handler: handler)
    }

    // MARK: - Running

    /// The operation's turn has come (pool thread): open the descriptor and start the I/O.
    func begin() {
        switch channel.descriptor.open() {
        case .failure(let error):
            return finish(error.code)
        case .success(let (fd, kind)):
            self.fd = fd
            descriptorKind = kind
            if channel.type == .random && kind.isStream { return finish(ESPIPE) }
            lastDelivery = gc_uptime_ns()
            if kind.isStream { runStream() } else { runFile() }
        }
    }

    /// Regular file: loop until done, one blocking call at a time.
    private func runFile() {
        while true {
            if cancelled.load(ordering: .relaxed) { return finish(ECANCELED) }
            let outcome = isRead ? readOnce(chunkLimit: 1 << 20) : writeOnce()
            if let error = outcome { return finish(error) }
        }
    }

    /// Stream: loop until done or EAGAIN; on EAGAIN wait for readiness (see IOChannel).
    func runStream() {
        while true {
            if cancelled.load(ordering: .relaxed) { return finish(ECANCELED) }
            let outcome = isRead ? readOnce(chunkLimit: 64 << 10) : writeOnce()
            guard let error = outcome else { continue }
            if error == EAGAIN {
                // Nothing more to read for now: a dispatch_read that has read something is
                // done; otherwise what was read may be due by the interval.
                if isRead && completesWhenDrained && totalRead > 0 { return finish(0) }
                if isRead { deliverPartialIfDue() }
                if channel.waitForReadiness(self, fd: fd) { return }
                return finish(ECANCELED)
            }
            return finish(error)
        }
    }

    /// One read(2)/pread(2). Returns nil to go on, 0 when done, else an errno (EAGAIN:
    /// nothing there yet).
    private func readOnce(chunkLimit: Int) -> Int32? {
        if remaining == 0 { return 0 }
        let room = settings.highWater - pendingSize
        let chunk = max(1, min(room, remaining, chunkLimit))
        guard var buffer = malloc(chunk) else { outOfMemory() }
        let n: Int
        if descriptorKind.isStream {
            n = gc_io_read(fd, buffer, chunk)
        } else {
            BlockingRegion.enter()
            n = channel.type == .random ? gc_io_pread(fd, buffer, chunk, offset) : gc_io_read(fd, buffer, chunk)
            BlockingRegion.leave()
        }
        if n <= 0 {
            free(buffer)
            return n == 0 ? 0 : Int32(-n)
        }
        if n < chunk / 2, let smaller = realloc(buffer, n) { buffer = smaller }
        let piece = DataObject.make(bytes: buffer, size: n, destructor: .free)
        if let old = pending {
            pending = DataObject.concat(old, piece)
            old.releaseData()
            piece.releaseData()
        } else {
            pending = piece
        }
        pendingSize += n
        totalRead += n
        offset += Int64(n)
        if remaining != Int.max { remaining -= n }
        if remaining > 0 { deliverPartialIfDue() }
        return remaining == 0 ? 0 : nil
    }

    /// One write(2)/pwrite(2)/send(2) of (part of) the next region. Nil to go on, 0 when
    /// done, else an errno.
    private func writeOnce() -> Int32? {
        guard let data else { return 0 }
        let total = data.size
        if written >= total { return 0 }
        let (region, start) = data._withUnsafeGuaranteedRef { $0.region(at: written) }
        let (bytes, size) = region._withUnsafeGuaranteedRef { ($0.bytes!, $0.size) }
        let skip = written - start
        // One piece is at most the high water mark (the progress reports follow pieces).
        let length = min(size - skip, settings.highWater)
        let n: Int
        if descriptorKind.isStream {
            n = gc_io_write(fd, bytes + skip, length, descriptorKind == .socket ? 1 : 0)
        } else {
            BlockingRegion.enter()
            n = channel.type == .random
                ? gc_io_pwrite(fd, bytes + skip, length, offset + Int64(written))
                : gc_io_write(fd, bytes + skip, length, 0)
            BlockingRegion.leave()
        }
        if n < 0 { return Int32(-n) }
        written += n
        if written >= total { return 0 }
        unreported += n
        if unreported >= settings.writeProgressStep { reportWriteProgress() }
        return nil
    }

    /// A write with data left to go: a partial handler call (done == false) with the data
    /// not yet written, as libdispatch makes once the low water mark's worth has gone out.
    private func reportWriteProgress() {
        guard let data else { return }
        unreported = 0
        let rest = DataObject.subrange(data, offset: written, length: data.size - written)
        let handler = self.handler
        handlerQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext {
            handler(false, rest, 0)
            rest.releaseData()
        })
    }

    /// A stream read about to wait for readiness with data it has not delivered: the
    /// uptime instant at which the interval makes that data due (the channel wakes the
    /// operation then, as if the descriptor had become readable), or nil. Called by the
    /// thread running the operation.
    var intervalWakeup: UInt64? {
        guard isRead, settings.interval != 0, pendingSize > 0,
              settings.strictInterval || pendingSize >= settings.lowWater else { return nil }
        return lastDelivery &+ settings.interval
    }

    /// Hands `pending` to the handler if the water marks or the interval say so.
    private func deliverPartialIfDue() {
        var due = pendingSize >= max(settings.lowWater, 1) || pendingSize >= settings.highWater
        if !due && settings.interval != 0 && pendingSize > 0
            && (settings.strictInterval || pendingSize >= settings.lowWater) {
            due = gc_uptime_ns() &- lastDelivery >= settings.interval
        }
        guard due, let chunk = pending else { return }
        pending = nil
        pendingSize = 0
        lastDelivery = gc_uptime_ns()
        let handler = self.handler
        handlerQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext {
            handler(false, chunk, 0)
            chunk.releaseData()
        })
    }

    /// The I/O is over with `error` (0: success): enqueue the final call, then tell the
    /// channel.
    private func finish(_ error: Int32) {
        deliverFinal(error: error, notifyChannel: true, finishIO: true)
    }

    /// Enqueues the final handler call. With `notifyChannel`, the channel hears when it has
    /// returned (and, with `finishIO`, that the I/O is over, right away).
    func deliverFinal(error: Int32, notifyChannel: Bool, finishIO: Bool = false) {
        let result: Unmanaged<DataObject>?
        if isRead {
            result = pending ?? .passUnretained(DataObject.empty)
            pending = nil
            pendingSize = 0
        } else if error != 0, let data {
            result = DataObject.subrange(data, offset: written, length: data.size - written)
        } else {
            result = nil
        }
        let handler = self.handler
        let channel = self.channel
        handlerQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext { [self] in
            handler(true, result, error)
            result?.releaseData()
            if notifyChannel { channel.operationDidDeliver(self) }
        })
        if finishIO { channel.operationDidFinishIO(self) }
    }
}
