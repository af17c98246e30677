import CGrandCentral
import Glibc
import Synchronization

// An I/O channel (dispatch_io_t): a descriptor, operations queued on it, and the rules for
// when each may run.
//
// Order. The descriptor's schedule (IOSchedule.swift) holds, in submission order, every
// operation of every channel on the descriptor that has not yet delivered its final
// handler call and every barrier that has not yet run. An operation may start when no
// barrier precedes it in the schedule and no other operation of its channel and direction
// is running: a channel's reads run one at a time in queue order, its writes likewise, and
// the two directions are independent (a read queued behind a write that waits for buffer
// space starts at once). A barrier runs when it is first in the schedule, i.e. when every
// earlier operation of every channel on the descriptor has delivered its final call; while
// it runs nothing starts, and when it returns the next items may. After `close`, once no
// item of the channel is left, the channel gives its descriptor back (readiness
// registrations removed, then flags restored or the descriptor closed) and the cleanup
// handler runs, once, on the cleanup queue.
//
// Rejected: libdispatch's design of a private serial queue per channel plus one per
// direction; a short critical section over plain fields says the same with less machinery,
// and nothing under the lock blocks (no system call except the event loop's inbox push).
//
// Where the I/O happens is IOOperation.swift: regular files on pool threads, streams on
// readiness reported by the event thread.

enum IOChannelType {
    case stream
    case random
}

/// The per-channel policy, snapshotted by each operation when it is submitted.
struct IOSettings {
    /// Most bytes in one handler call.
    var highWater = Int.max
    /// Fewest bytes in a partial handler call. 0 (the default, which libdispatch leaves
    /// unspecified) delivers whatever each read returned.
    var lowWater = 0
    /// Nanoseconds between partial handler calls; 0 for none.
    var interval: UInt64 = 0
    /// DISPATCH_IO_STRICT_INTERVAL: at the interval, deliver even below the low water mark.
    var strictInterval = false

    /// A write reports progress (a partial call with the data not yet written) each time
    /// this many bytes have gone out: the low water mark, or with none set libdispatch's
    /// default (one 1 MiB chunk, its low water mark on Linux); never more than the high
    /// water mark, which also bounds one piece.
    var writeProgressStep: Int {
        max(1, min(lowWater > 0 ? lowWater : 1 << 20, highWater))
    }
}

/// An operation's handler: (done, data, error). The data is borrowed for the call; nil
/// only for a write that has nothing left over.
typealias IOHandlerBody = (Bool, Unmanaged<DataObject>?, Int32) -> Void

final class IOChannel: DispatchObject, @unchecked Sendable {
    let type: IOChannelType
    let descriptor: IODescriptor
    /// The channel's error, fixed at creation (libdispatch's checks then): the descriptor
    /// was not open, the path check failed, or a random channel was made on a pipe or
    /// socket (ESPIPE). Every operation ends with it; the cleanup handler is called with it
    /// at once. 0 for a usable channel: later errors (a failed open(2), I/O errors) are the
    /// operations', and the cleanup handler then gets 0.
    let channelError: Int32
    /// A random channel's offset 0: the client descriptor's file position when the channel
    /// was made (0 for path channels and stream channels).
    let basePosition: Int64
    /// Where the cleanup handler runs (the default root queue when nil).
    private let cleanupQueue: DispatchQueue?

    /// The descriptor's schedule; its lock guards every field below (shared by every
    /// channel on the descriptor).
    var schedule: IOSchedule { descriptor.schedule }
    /// The running (or readiness-waiting) operation of each direction.
    private var reading: IOOperation?
    private var writing: IOOperation?
    private var isClosed = false
    private var cleanupStarted = false
    var settings = IOSettings()
    /// Taken (set to nil) when it is scheduled, so it runs once.
    private var cleanupHandler: ((Int32) -> Void)?
    /// Readiness registrations, made on the first EAGAIN of each direction and removed at
    /// cleanup. Written under the lock; each holds one ARC retain of the channel.
    var readToken: DescriptorToken?
    var writeToken: DescriptorToken?

    /// Unregistrations still outstanding during cleanup (cleanup's own thread and the
    /// event thread's completions).
    private let pendingUnregistrations = Atomic<Int>(0)

    /// Whether the cleanup handler waits for every channel sharing the descriptor (true,
    /// as in libdispatch; false for the dispatch_read/dispatch_write channels, whose cleanup
    /// is the client's one-shot handler). Set before the first operation.
    var waitsForSharers = true

    /// Called once, on the thread that finishes the cleanup, when the channel has let go of
    /// its descriptor and before the cleanup handler is scheduled (dispatch_read/write:
    /// start the next operation of the descriptor's line). Set before the first operation.
    var didLetGo: (() -> Void)?

    init(type: IOChannelType, descriptor: IODescriptor, cleanupQueue: DispatchQueue?,
         cleanupHandler: ((Int32) -> Void)?) {
        self.type = type
        self.descriptor = descriptor
        self.cleanupQueue = cleanupQueue
        var error = descriptor.error
        if error == 0 && type == .random && descriptor.isPipeOrSocket { error = ESPIPE }
        var base: Int64 = 0
        if error == 0 && type == .random, let fd = descriptor.clientFileDescriptor {
            base = max(0, Int64(lseek(fd, 0, SEEK_CUR)))
        }
        channelError = error
        basePosition = base
        if error != 0, let cleanupHandler {
            // libdispatch calls the cleanup handler of a channel that failed its checks at
            // once, with the error; the usual cleanup at close then finds no handler.
            (cleanupQueue ?? DispatchQueue.defaultRootQueue).enqueue(closureBoxTrampoline,
                                                                     ClosureBox.retainedContext { cleanupHandler(error) })
            self.cleanupHandler = nil
        } else {
            self.cleanupHandler = cleanupHandler
        }
        super.init(kind: .io)
    }

    override func externalRefsDidReachZero() {
        // The last release of an open channel closes it (operations in flight keep it alive).
        close(stop: false)
    }

    /// `io[0x…] = { type, refcount, fd or path or error, closed }` (DispatchObject's
    /// "Description"): `path` while a path channel has not opened its file yet, `fd` while
    /// the descriptor is open, `error` (an errno) once opening failed or the channel has
    /// given its descriptor back (EBADF).
    override func debugDescription() -> String {
        let closed = schedule.lock.withLock { isClosed }
        return describe([("type", type == .stream ? "stream" : "random"), ("refcount", debugRefcount),
                         descriptor.debugField, ("closed", "\(closed)")])
    }

    // MARK: - Submitting

    /// Queues `operation`; it starts when the order rules allow.
    func submit(_ operation: IOOperation) {
        schedule.lock.lock()
        if isClosed {
            schedule.lock.unlock()
            operation.deliverFinal(error: ECANCELED, notifyChannel: false)
            return
        }
        if channelError != 0 {
            // It ends at once with the channel's error, but stays in the schedule until its
            // handler has returned, so the cleanup comes after it.
            operation.state = .finished
            schedule.items.append(.operation(operation))
            schedule.lock.unlock()
            operation.deliverFinal(error: channelError, notifyChannel: true)
            return
        }
        schedule.items.append(.operation(operation))
        let actions = advanceLocked()
        schedule.lock.unlock()
        perform(actions)
    }

    /// Queues a barrier: `body` runs on a global queue once every earlier operation has
    /// finished, and no later one starts before it returns.
    func barrier(_ body: @escaping () -> Void) {
        schedule.lock.lock()
        if isClosed && cleanupStarted {
            schedule.lock.unlock()
            DispatchQueue.defaultRootQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext(body))
            return
        }
        schedule.items.append(.barrier(self, body))
        let actions = advanceLocked()
        schedule.lock.unlock()
        perform(actions)
    }

    /// dispatch_io_close: no new operations; with `stop`, outstanding ones are cancelled
    /// (they report ECANCELED). Closing twice is harmless.
    func close(stop: Bool) {
        var cancelledNow: [IOOperation] = []
        schedule.lock.lock()
        isClosed = true
        if stop {
            for case .operation(let op) in schedule.items where op.channel === self && op.state != .finished {
                op.cancelled.store(true, ordering: .relaxed)
                // A queued operation never starts; one waiting for readiness has no thread
                // that would notice: both finish here. A running one notices by itself.
                if op.state == .queued || op.state == .waiting {
                    op.state = .finished
                    if reading === op { reading = nil }
                    if writing === op { writing = nil }
                    cancelledNow.append(op)
                }
            }
        }
        let actions = advanceLocked()
        schedule.lock.unlock()
        for op in cancelledNow { op.deliverFinal(error: ECANCELED, notifyChannel: true) }
        perform(actions)
    }

    /// dispatch_io_create_with_io: the descriptor, with one more user, for a new channel
    /// made from this one; nil once this one is closed (the new channel then fails with
    /// ECANCELED, as in libdispatch). Under the lock, so a close cannot slip between the
    /// check and the new user: the last user's finish always comes after `isClosed` is set.
    func descriptorForNewChannel() -> IODescriptor? {
        schedule.lock.withLock {
            if isClosed { return nil }
            descriptor.addUser()
            return descriptor
        }
    }

    /// dispatch_io_get_descriptor: -1 before the descriptor is open and after close;
    /// called from one of this channel's barriers, it opens a path channel first (as
    /// libdispatch documents), so the barrier can fsync or lseek it.
    var currentDescriptor: Int32 {
        let (closed, inBarrier) = schedule.lock.withLock {
            (isClosed, schedule.barrierChannel === self && schedule.barrierThread == pthread_self())
        }
        if inBarrier, case .success(let (fd, _)) = descriptor.open() { return fd }
        return closed ? -1 : descriptor.currentDescriptor
    }

    func setHighWater(_ value: Int) {
        schedule.lock.withLock {
            settings.highWater = max(value, 1)
            if settings.lowWater > settings.highWater { settings.lowWater = settings.highWater }
        }
    }

    func setLowWater(_ value: Int) {
        schedule.lock.withLock {
            settings.lowWater = value
            if settings.highWater < value { settings.highWater = max(value, 1) }
        }
    }

    func setInterval(_ nanoseconds: UInt64, strict: Bool) {
        schedule.lock.withLock {
            settings.interval = nanoseconds
            settings.strictInterval = strict
        }
    }

    // MARK: - Operations report back (any thread)

    /// `operation` did its last I/O (its final handler call is enqueued): the next
    /// operation of its direction may start.
    func operationDidFinishIO(_ operation: IOOperation) {
        schedule.lock.lock()
        operation.state = .finished
        if reading === operation { reading = nil }
        if writing === operation { writing = nil }
        let actions = advanceLocked()
        schedule.lock.unlock()
        perform(actions)
    }

    /// The final handler call of `operation` returned: barriers and cleanup may proceed.
    func operationDidDeliver(_ operation: IOOperation) {
        schedule.lock.lock()
        if let index = schedule.items.firstIndex(where: { if case .operation(let op) = $0 { return op === operation }; return false }) {
            schedule.items.remove(at: index)
        }
        let actions = advanceLocked()
        schedule.lock.unlock()
        perform(actions)
    }

    /// Marks the running `operation` as waiting for readiness and arms the direction's
    /// registration. Returns false (and does nothing) if it was cancelled meanwhile; the
    /// caller then finishes it.
    func waitForReadiness(_ operation: IOOperation, fd: Int32) -> Bool {
        schedule.lock.lock()
        defer { schedule.lock.unlock() }
        if operation.cancelled.load(ordering: .relaxed) { return false }
        operation.state = .waiting
        let context = Unmanaged.passUnretained(self).toOpaque()
        if operation.isRead {
            if let token = readToken {
                EventLoop.shared.rearmDescriptor(token)
            } else {
                _ = Unmanaged.passRetained(self)  // released by the unregistration's completion
                readToken = EventLoop.shared.registerDescriptor(fd, interest: .read, handler: ioReadReady, context: context)
            }
            if let wakeup = operation.intervalWakeup {
                // The interval is due before more data may come: wake the read then, as if
                // the descriptor were readable (a read that finds nothing waits again; a
                // wakeup that finds the operation running or gone does nothing).
                _ = EventLoop.shared.scheduleTimer(deadline: DispatchClock.encode(.uptime, wakeup), leeway: 0,
                                                   fire: ioIntervalDue, context: Unmanaged.passRetained(self).toOpaque())
            }
        } else {
            if let token = writeToken {
                EventLoop.shared.rearmDescriptor(token)
            } else {
                _ = Unmanaged.passRetained(self)
                writeToken = EventLoop.shared.registerDescriptor(fd, interest: .write, handler: ioWriteReady, context: context)
            }
        }
        return true
    }

    /// The event thread reports readiness (or a read's interval came due): the waiting
    /// operation of that direction runs
    /// again, on a pool thread.
    fileprivate func readinessArrived(read: Bool) {
        schedule.lock.lock()
        let op = read ? reading : writing
        guard let op, op.state == .waiting else { schedule.lock.unlock(); return }
        op.state = .running
        schedule.lock.unlock()
        DispatchQueue.defaultRootQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext { op.runStream() })
    }

    // MARK: - Scheduling

    private enum Action {
        case start(IOOperation)
        case barrier(IOChannel, () -> Void)
        case cleanup
    }

    /// Applies the order rules to the descriptor's schedule (starting operations of any
    /// channel on it) and decides this channel's cleanup; returns what to do once the lock
    /// is dropped. Under the lock.
    private func advanceLocked() -> [Action] {
        var actions: [Action] = []
        let schedule = self.schedule
        if schedule.barrierChannel == nil {
            if let first = schedule.items.first, case .barrier(let channel, let body) = first {
                schedule.items.removeFirst()
                schedule.barrierChannel = channel
                actions.append(.barrier(channel, body))
            } else {
                for item in schedule.items {
                    guard case .operation(let op) = item else { break }  // nothing passes a barrier
                    guard op.state == .queued else { continue }
                    let channel = op.channel
                    if op.isRead {
                        if channel.reading == nil { channel.reading = op; op.state = .running; actions.append(.start(op)) }
                    } else {
                        if channel.writing == nil { channel.writing = op; op.state = .running; actions.append(.start(op)) }
                    }
                }
            }
        }
        if isClosed && !cleanupStarted && schedule.barrierChannel !== self && !schedule.hasItems(of: self) {
            cleanupStarted = true
            actions.append(.cleanup)
        }
        return actions
    }

    private func perform(_ actions: [Action]) {
        for action in actions {
            switch action {
            case .start(let op):
                DispatchQueue.defaultRootQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext { op.begin() })
            case .barrier(let channel, let body):
                DispatchQueue.defaultRootQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext {
                    let schedule = channel.schedule
                    schedule.lock.withLock { schedule.barrierThread = pthread_self() }
                    body()
                    schedule.lock.lock()
                    schedule.barrierThread = 0
                    schedule.barrierChannel = nil
                    let next = channel.advanceLocked()
                    schedule.lock.unlock()
                    channel.perform(next)
                })
            case .cleanup:
                beginCleanup()
            }
        }
    }

    // MARK: - Cleanup

    /// Every operation is over: remove the readiness registrations, then give the
    /// descriptor back and run the cleanup handler.
    private func beginCleanup() {
        // No operation runs any more, so the tokens are stable.
        let tokens = schedule.lock.withLock { () -> [DescriptorToken] in
            let t = [readToken, writeToken].compactMap { $0 }
            readToken = nil
            writeToken = nil
            return t
        }
        pendingUnregistrations.store(tokens.count + 1, ordering: .relaxed)
        let context = Unmanaged.passUnretained(self).toOpaque()
        for token in tokens {
            EventLoop.shared.unregisterDescriptor(token, completion: ioUnregistered, context: context)
        }
        unregistrationDone()
    }

    fileprivate func unregistrationDone() {
        guard pendingUnregistrations.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue == 1 else { return }
        let error = channelError  // (a channel with an error has called its handler already)
        let handler = schedule.lock.withLock { () -> ((Int32) -> Void)? in
            let h = cleanupHandler
            cleanupHandler = nil
            return h
        }
        let queue = cleanupQueue ?? DispatchQueue.defaultRootQueue
        // Runs when every channel sharing the descriptor is done (see IODescriptor).
        let didLetGo = self.didLetGo
        descriptor.channelDidFinish(waitForOthers: waitsForSharers) {
            didLetGo?()
            guard let handler else { return }
            queue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext { handler(error) })
        }
    }
}


// Event-thread callbacks: hand the work to a pool thread at once.

private let ioReadReady: DescriptorHandler = { context, _ in
    Unmanaged<IOChannel>.fromOpaque(context!).takeUnretainedValue().readinessArrived(read: true)
}

private let ioWriteReady: DescriptorHandler = { context, _ in
    Unmanaged<IOChannel>.fromOpaque(context!).takeUnretainedValue().readinessArrived(read: false)
}

/// An unregistration completed (event thread): drop the registration's retain; the last
/// one continues the cleanup on a pool thread.
private let ioUnregistered: DispatchFunction = { context in
    let channel = Unmanaged<IOChannel>.fromOpaque(context!)
    DispatchQueue.defaultRootQueue.enqueue(closureBoxTrampoline, ClosureBox.retainedContext {
        let c = channel.takeUnretainedValue()
        c.unregistrationDone()
        channel.release()
    })
}

/// Event thread: a stream read's interval came due (`context`: the channel, retained by
/// the timer).
private let ioIntervalDue: DispatchFunction = { context in
    Unmanaged<IOChannel>.fromOpaque(context!).takeRetainedValue().readinessArrived(read: true)
}
