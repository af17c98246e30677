import CGrandCentral
import Glibc
import Synchronization

// The descriptor behind one or more channels. Channels share one when they are made from
// one another (dispatch_io_create_with_io) and when they are made on the same client
// descriptor while it is in use (`shared(descriptor:)`, as libdispatch shares its fd
// entries): otherwise the first channel to finish would put a stream's blocking mode back
// under the others. Every sharing channel's cleanup handler waits for the last one, as in
// libdispatch (a cleanup handler may close the descriptor). It checks a path when the
// channel is made (`checkPath`, libdispatch's stat at creation) and opens it lazily, on the
// first operation, remembering the outcome; it makes a stream descriptor non-blocking and
// puts the old status flags back when the last channel using it is done; and it closes a
// descriptor it opened itself (a path channel's) at that moment, never a descriptor the
// client passed in. It owns the schedule that orders the operations and barriers of every
// channel on it (IOSchedule.swift).
//
// A stream is anything epoll can watch (pipes, sockets, ttys): read and written on
// readiness, never by a thread parked in read(2). A regular file (or block device) is read
// and written on pool threads inside the pool's blocking accounting.

/// What the descriptor turned out to be once open.
enum IODescriptorKind {
    case file
    case pipe
    case socket
    case otherStream

    var isStream: Bool { self != .file }
}

final class IODescriptor: @unchecked Sendable {
    enum State {
        /// A path channel before its first operation (the path is strdup'ed).
        case unopened(path: UnsafeMutablePointer<CChar>, oflag: Int32, mode: UInt32)
        case open(Int32, IODescriptorKind)
        /// The open, or the descriptor the client passed, failed: every operation reports it.
        case failed(Int32)
    }

    /// The order of the operations and barriers of every channel on the descriptor.
    let schedule = IOSchedule()

    /// Protected by `lock` (a mutex, not a spin lock: opening makes a system call under it).
    private var state: State
    private let lock = Mutex<Void>(())
    /// Whether the descriptor is ours to close (opened from a path). Immutable.
    private let ownsDescriptor: Bool
    /// The status flags before O_NONBLOCK was set, or nil if the flags were not changed.
    /// Written under `lock` when the descriptor becomes open; read at `channelDidFinish`.
    private var savedFlags: Int32?
    /// Channels still using the descriptor; the last one to finish restores or closes it.
    private let users = Atomic<Int>(1)
    /// Cleanups of channels that finished before the last one, under `lock`.
    private var waitingCleanups: [() -> Void] = []
    /// The client descriptor this entry is registered under in `registry`, or nil.
    private var registeredDescriptor: Int32?
    /// The file behind `registeredDescriptor` when the entry was made
    /// (`gc_descriptor_identity`: device and inode). Written before the entry is published
    /// in `registry`, then immutable.
    private var registeredIdentity: UInt64 = 0

    /// Client descriptors in use by channels, by number. Guarded by its mutex, which also
    /// covers creating an entry (its O_NONBLOCK) and the last user's restoring the flags,
    /// so a new channel never sees the flags of one that is going away.
    private static let registry = Mutex<[Int32: IODescriptor]>([:])

    /// The descriptor entry for client descriptor `fd`: the one channels already use, or a
    /// new one (checked now: EBADF for a descriptor that is not open).
    ///
    /// Reused numbers: a client may close a descriptor while an operation on it still waits
    /// for readiness (it then never hears again: the event loop retires the registration,
    /// see EventLoopDescriptors.swift) and get the number back for another file. An entry
    /// whose file is not the one the number names now is stale: it is not shared, and a new
    /// entry takes its place in the table (the stale one keeps its channels and their
    /// schedule, and never touches the new file's flags; see `channelDidFinish`).
    static func shared(descriptor fd: Int32) -> IODescriptor {
        let identity = gc_descriptor_identity(fd)
        return registry.withLock { table in
            if let entry = table[fd], entry.registeredIdentity == identity, entry.tryAddUser() { return entry }
            let entry = IODescriptor(descriptor: fd)
            if case .open = entry.state {
                entry.registeredDescriptor = fd
                entry.registeredIdentity = identity
                table[fd] = entry
            }
            return entry
        }
    }

    /// A descriptor the client owns; checked now (EBADF for one that is not open).
    private init(descriptor: Int32) {
        ownsDescriptor = false
        state = .failed(EBADF)
        state = prepare(descriptor)
    }

    /// No descriptor, only an error (a channel made with dispatch_io_create_with_io from a
    /// closed channel: ECANCELED). Shared with no one.
    init(failed error: Int32) {
        ownsDescriptor = false
        state = .failed(error)
    }

    /// A path to open at the first operation, checked now as libdispatch checks it when a
    /// path channel is created (`checkPath`): a failure leaves the entry failed with it,
    /// and the channel takes it as its own error.
    init(path: UnsafePointer<CChar>, oflag: Int32, mode: UInt32, random: Bool) {
        ownsDescriptor = true
        let checked = IODescriptor.checkPath(path, oflag: oflag, random: random)
        state = checked == 0 ? .unopened(path: strdup(path), oflag: oflag, mode: mode) : .failed(checked)
    }

    /// libdispatch's check at path-channel creation: stat the path (lstat with O_NOFOLLOW);
    /// if that fails and the channel creates the file (O_CREAT, a path not ending in '/'),
    /// stat its parent directory instead, and a parent that exists means a regular file
    /// will be created. Returns 0, the errno of the failed stat, EISDIR for a directory, or
    /// ESPIPE for a FIFO or socket on a random channel. (For a file directly under "/",
    /// the parent checked is "/"; libdispatch checks the empty path there and fails.)
    static func checkPath(_ path: UnsafePointer<CChar>, oflag: Int32, random: Bool) -> Int32 {
        var st = stat()
        let rc = oflag & O_NOFOLLOW != 0 ? lstat(path, &st) : stat(path, &st)
        var mode = st.st_mode
        if rc != 0 {
            let error = errno
            let length = strlen(path)
            guard oflag & O_CREAT != 0, length > 0, path[length - 1] != 0x2F /* '/' */ else { return error }
            guard let copy = strdup(path) else { return ENOMEM }
            defer { free(copy) }
            guard let slash = strrchr(copy, 0x2F) else { return error }
            slash[slash == copy ? 1 : 0] = 0  // the parent directory ("/" for a file under it)
            var parent = stat()
            guard stat(copy, &parent) == 0 else { return error }
            mode = S_IFREG
        }
        if mode & S_IFMT == S_IFDIR { return EISDIR }
        if random && (mode & S_IFMT == S_IFIFO || mode & S_IFMT == S_IFSOCK) { return ESPIPE }
        return 0
    }

    deinit {
        if case .unopened(let path, _, _) = state { free(path) }
    }

    /// Sets up a freshly known descriptor: its kind, and O_NONBLOCK for a stream.
    private func prepare(_ fd: Int32) -> State {
        let kind = gc_io_kind(fd)
        if kind < 0 { return .failed(-kind) }
        switch kind {
        case GC_IO_KIND_DIRECTORY:
            if ownsDescriptor { Glibc.close(fd) }
            return .failed(EISDIR)
        case GC_IO_KIND_REGULAR: return .open(fd, .file)
        default:
            var old: Int32 = 0
            let rc = gc_io_set_nonblocking(fd, &old)
            if rc < 0 {
                if ownsDescriptor { Glibc.close(fd) }
                return .failed(-rc)
            }
            if old & O_NONBLOCK == 0 { savedFlags = old }
            return .open(fd, kind == GC_IO_KIND_PIPE ? .pipe : kind == GC_IO_KIND_SOCKET ? .socket : .otherStream)
        }
    }

    /// The open descriptor and its kind, opening the path first if need be; or the errno
    /// that prevents it. Any thread; may block in open(2) the first time.
    func open() -> Result<(Int32, IODescriptorKind), IOError> {
        lock.withLock { _ in
            if case .unopened(let path, let oflag, let mode) = state {
                let fd = gc_io_open(path, oflag, mode)
                free(path)
                state = fd < 0 ? .failed(-fd) : prepare(fd)
            }
            switch state {
            case .open(let fd, let kind): return .success((fd, kind))
            case .failed(let error): return .failure(IOError(code: error))
            case .unopened: fatalError("unreachable")
            }
        }
    }

    /// The descriptor if it is open, else -1 (not opened yet, or the open failed).
    var currentDescriptor: Int32 {
        lock.withLock { _ in
            if case .open(let fd, _) = state { return fd }
            return -1
        }
    }

    /// For `dispatch_debug` (IOChannel.debugDescription): `fd = N`, `path = "…"` before a
    /// path channel opens, or `error = <errno>` after a failed open or once given back.
    var debugField: (String, String) {
        lock.withLock { _ in
            switch state {
            case .unopened(let path, _, _): return ("path", DispatchObject.quoted(String(cString: path)))
            case .open(let fd, _): return ("fd", "\(fd)")
            case .failed(let error): return ("error", "\(error)")
            }
        }
    }

    /// The error the descriptor is in, or 0.
    var error: Int32 {
        lock.withLock { _ in
            if case .failed(let error) = state { return error }
            return 0
        }
    }

    /// Whether the descriptor is a pipe or a socket (known once open; false before).
    var isPipeOrSocket: Bool {
        lock.withLock { _ in
            if case .open(_, let kind) = state { return kind == .pipe || kind == .socket }
            return false
        }
    }

    /// The client's descriptor when it is a regular file (a random channel made on it
    /// measures its offsets from its file position), else nil (a path channel's, a stream,
    /// or not open).
    var clientFileDescriptor: Int32? {
        lock.withLock { _ in
            if !ownsDescriptor, case .open(let fd, .file) = state { return fd }
            return nil
        }
    }

    /// One more channel uses the descriptor (dispatch_io_create_with_io).
    func addUser() { users.wrappingAdd(1, ordering: .relaxed) }

    /// One more channel, unless the last one has already finished (then the caller makes a
    /// new entry).
    private func tryAddUser() -> Bool {
        var n = users.load(ordering: .relaxed)
        while n > 0 {
            let (done, now) = users.weakCompareExchange(expected: n, desired: n + 1, ordering: .relaxed)
            if done { return true }
            n = now
        }
        return false
    }

    /// A channel is done with the descriptor (its operations are over and its readiness
    /// registrations are gone); `cleanup` schedules its cleanup handler. The last channel
    /// puts the flags back or closes what it opened, then every waiting cleanup runs.
    /// `waitForOthers: false` (dispatch_read/dispatch_write, whose handler is their cleanup)
    /// runs `cleanup` as soon as this channel is done.
    func channelDidFinish(waitForOthers: Bool = true, then cleanup: @escaping () -> Void) {
        if waitForOthers {
            lock.withLock { _ in waitingCleanups.append(cleanup) }
        }
        defer { if !waitForOthers { cleanup() } }
        // acquiringAndReleasing: the last user must see the others' uses completed.
        guard users.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue == 1 else { return }
        let finish = { [self] in
            lock.withLock { _ in
                guard case .open(let fd, _) = state else { return }
                if ownsDescriptor {
                    Glibc.close(fd)
                } else if let savedFlags, gc_descriptor_identity(fd) == registeredIdentity {
                    // Not if the number now names another file (the client closed it
                    // under a pending operation and reused it): those flags are not ours.
                    _ = gc_io_restore_flags(fd, savedFlags)
                }
                state = .failed(EBADF)
            }
        }
        if let fd = registeredDescriptor {
            IODescriptor.registry.withLock { table in
                if table[fd] === self { table[fd] = nil }
                finish()
            }
        } else {
            finish()
        }
        let cleanups = lock.withLock { _ in
            defer { waitingCleanups = [] }
            return waitingCleanups
        }
        for run in cleanups { run() }
    }
}

/// An errno, as the Result failure type.
struct IOError: Error {
    let code: Int32
}
