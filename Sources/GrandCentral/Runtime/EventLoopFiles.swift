import CGrandCentral
import Glibc
import Synchronization

// File changes on the event thread: what vnode sources are built on.
//
// Protocol, per registration (one set of `FileChanges` wanted on the file an open
// descriptor refers to):
//   `registerFile` hands the registration to the event thread and waits until the watch
//   is in place (a handshake: the watch exists when it returns, so a change the caller
//   makes right after activating its source is seen); each later change that the
//   registration wants calls `handler(context, changes)` on the event thread, as often as
//   changes happen; `unregisterFile` removes it and then calls `completion(context)` on
//   the event thread, after which the handler is never called again.
//
// The kernel side is one inotify instance for the process, created on first use and
// polled by the event loop as one of its own descriptors (generation 0, like the wakeup
// eventfd; the loop hands its readiness to `deliverFileEvents`). A descriptor is watched
// through its /proc/self/fd link, which inotify follows to the inode, so a file that was
// renamed or unlinked while open can still be watched. inotify has one watch per inode,
// so every registration on one file shares it (`FileWatchTable.Watch`): the watch's mask
// is the union of what its registrations asked for (IN_MASK_ADD), and each registration
// gets only the changes it asked for. The mask of a shared watch only grows while the
// watch lives — narrowing it would need a descriptor of the inode, and a remaining
// registration's descriptor may by then name another file — so a cancelled source can
// leave its events in the watch until the last registration of that file goes (they are
// filtered out, costing only a wakeup).
//
// What inotify reports and what a change is:
//   IN_MODIFY            → write, and extend when the file grew since the registration's
//                          last event (fstat: the size is kept per registration);
//   IN_ATTRIB            → attrib, unless the only thing that changed is the link count;
//   the link count (fstat st_nlink, compared at every event) changed → link; dropped to
//                          0 → delete. A file unlinked while a descriptor keeps it alive
//                          gets IN_ATTRIB, never IN_DELETE_SELF, until that descriptor
//                          closes: the link count is how its deletion is seen;
//   IN_DELETE_SELF       → delete;  IN_MOVE_SELF → rename;  IN_UNMOUNT → revoke;
//   on a directory, entries created, deleted or moved in or out → write (and link when
//                          its link count changed: a subdirectory came or went);
//   IN_Q_OVERFLOW (events were lost) → every registration compares fstat with its last
//                          and reports what it can tell (write, extend, attrib, link,
//                          delete).
//   Never: funlock (Linux has no such event).
//
// Rejected: a kernel watch added by the registering thread itself, without the
// handshake (the event thread, removing the last registration of a shared watch, could
// remove the very watch another thread was just being given), and adding it on the event
// thread without waiting (a change right after activation would be missed, and the
// registration handler could not mean "the source is watching").

/// What a vnode source watches for; the raw values are DISPATCH_VNODE_*'s, so a source
/// passes its mask through unchanged.
struct FileChanges: OptionSet, Sendable {
    let rawValue: UInt
    static let delete = FileChanges(rawValue: 0x1)
    static let write = FileChanges(rawValue: 0x2)
    static let extend = FileChanges(rawValue: 0x4)
    static let attrib = FileChanges(rawValue: 0x8)
    static let link = FileChanges(rawValue: 0x10)
    static let rename = FileChanges(rawValue: 0x20)
    static let revoke = FileChanges(rawValue: 0x40)

    /// Directory entry events (reported with a name).
    static let entryEvents: UInt32 = GC_WATCH_CREATE | GC_WATCH_DELETE | GC_WATCH_MOVED_FROM | GC_WATCH_MOVED_TO

    /// The inotify events a registration wanting these changes needs; 0 when none (the
    /// registration then never fires, and no watch is added).
    var watchEvents: UInt32 {
        var events: UInt32 = 0
        if contains(.write) { events |= GC_WATCH_MODIFY | FileChanges.entryEvents }
        if contains(.extend) { events |= GC_WATCH_MODIFY }
        if contains(.attrib) { events |= GC_WATCH_ATTRIB }
        if contains(.link) { events |= GC_WATCH_ATTRIB | FileChanges.entryEvents }
        if contains(.delete) { events |= GC_WATCH_ATTRIB | GC_WATCH_DELETE_SELF }
        if contains(.rename) { events |= GC_WATCH_MOVE_SELF }
        // IN_UNMOUNT is sent to every watch; a watch needs at least one event of its own.
        if contains(.revoke) { events |= GC_WATCH_UNMOUNT | GC_WATCH_DELETE_SELF }
        return events
    }
}

/// Called on the event thread with the registration's context and the changes seen
/// (`FileChanges` raw value, never 0).
typealias FileHandler = @convention(c) (UnsafeMutableRawPointer?, UInt) -> Void

/// One registration: some changes wanted on the file `descriptor` refers to.
///
/// Fields and who may touch them:
/// - `descriptor`, `changes`, `handler`, `context`: immutable after init.
/// - `registered`, `result`: the handshake. The event thread writes `result` (0, or a
///   negative errno when no watch could be added) and then signals `registered`; the
///   registering thread waits on `registered` and then reads `result` (the semaphore's
///   acquire/release orders the plain field).
/// - `watch`, `last`, `hasLast`: the event thread only.
final class FileRegistration: @unchecked Sendable {
    let descriptor: Int32
    let changes: FileChanges
    let handler: FileHandler
    let context: UnsafeMutableRawPointer?

    let registered = FutexSemaphore(value: 0)
    var result: Int32 = 0

    /// The shared watch this registration is in; nil when it is in none (never fires).
    var watch: FileWatchTable.Watch?
    /// The file as fstat saw it at the registration's previous event (or registration).
    var last = gc_file_status_t()
    var hasLast = false

    init(descriptor: Int32, changes: FileChanges, handler: FileHandler, context: UnsafeMutableRawPointer?) {
        self.descriptor = descriptor
        self.changes = changes
        self.handler = handler
        self.context = context
    }
}

/// A registration, for `unregisterFile`.
typealias FileToken = RegistrationToken<FileRegistration>

/// The inotify instance and its watches. Owned by the event thread: only it reads or
/// writes these fields.
struct FileWatchTable {
    /// The registrations on one inode, sharing one inotify watch.
    final class Watch {
        let number: Int32
        var registrations: [FileRegistration] = []
        /// False once the watch is gone from the kernel (IN_IGNORED: the inode was freed
        /// or its file system unmounted); its registrations then never fire again.
        var isLive = true

        init(number: Int32) { self.number = number }
    }

    /// The inotify descriptor, -1 until the first registration.
    var descriptor: Int32 = -1
    /// Live watches by watch descriptor.
    var watches: [Int32: Watch] = [:]
    /// Where `gc_watch_read` unpacks events (allocated with the descriptor).
    var events: UnsafeMutablePointer<gc_watch_event_t>?
}

extension EventLoop {
    // MARK: - File API (any thread but the event thread)

    /// Watches the file `descriptor` refers to for `changes`: `handler(context, seen)` is
    /// called on the event thread at each change it wants. Waits until the watch is in
    /// place. Returns nil, registering nothing, when no watch can be added (a bad or
    /// closed descriptor, no inotify instance to be had) or `changes` asks for nothing
    /// Linux can report. Must not be called on the event thread (it would wait for
    /// itself).
    func registerFile(_ descriptor: Int32, changes: FileChanges, handler: FileHandler,
                      context: UnsafeMutableRawPointer?) -> (token: FileToken?, error: Int32) {
        if changes.watchEvents == 0 || descriptor < 0 { return (nil, -EBADF) }
        let registration = FileRegistration(descriptor: descriptor, changes: changes, handler: handler,
                                            context: context)
        fileInbox.register(registration)
        requestWakeup()
        _ = registration.registered.wait(timeoutNanoseconds: -1)
        return registration.result == 0 ? (FileToken(registration: registration), 0) : (nil, registration.result)
    }

    /// Unregisters; then calls `completion(context)` on the event thread, after which the
    /// handler is never called again. Call at most once per token. Any thread.
    func unregisterFile(_ token: FileToken, completion: DispatchFunction, context: UnsafeMutableRawPointer?) {
        fileInbox.unregister(token.registration, completion: completion, context: context)
        requestWakeup()
    }

    // MARK: - Event thread

    func drainFileInbox() {
        fileInbox.drain(register: { registration in
            registration.result = addWatch(registration)
            _ = registration.registered.signal()
        }, unregister: { removeWatch($0) })
    }

    /// Puts `registration` in the watch of its file. Returns 0 or a negative errno.
    private func addWatch(_ registration: FileRegistration) -> Int32 {
        if files.descriptor < 0 {
            let descriptor = gc_watch_create()
            if descriptor < 0 { return descriptor }
            let rc = gc_poll_control(poll, GC_POLL_ADD, descriptor, GC_POLL_IN, EventLoop.internalData(descriptor))
            if rc < 0 {
                _ = gc_descriptor_close(descriptor)
                return rc
            }
            files.descriptor = descriptor
            files.events = .allocate(capacity: Int(GC_WATCH_READ_CAPACITY))
        }
        let number = gc_watch_add_descriptor(files.descriptor, registration.descriptor,
                                             registration.changes.watchEvents | GC_WATCH_MASK_ADD)
        if number < 0 { return number }
        let watch: FileWatchTable.Watch
        if let existing = files.watches[number] {
            watch = existing
        } else {
            watch = FileWatchTable.Watch(number: number)
            files.watches[number] = watch
        }
        watch.registrations.append(registration)
        registration.watch = watch
        registration.hasLast = gc_file_status(registration.descriptor, &registration.last) == 0
        return 0
    }

    /// Takes `registration` out of its watch, removing the watch with its last one.
    private func removeWatch(_ registration: FileRegistration) {
        guard let watch = registration.watch else { return }
        registration.watch = nil
        watch.registrations.removeAll { $0 === registration }
        if watch.registrations.isEmpty && watch.isLive {
            watch.isLive = false
            files.watches[watch.number] = nil
            // The kernel answers with IN_IGNORED for this number, which then finds no
            // watch and is dropped. (Numbers are handed out cyclically, so a new watch
            // does not get this one back while that event can still be pending.)
            _ = gc_watch_remove(files.descriptor, watch.number)
        }
    }

    /// The inotify descriptor is readable: reads every pending event and reports each
    /// to the registrations that want it.
    func deliverFileEvents() {
        guard let events = files.events else { return }
        while true {
            let count = gc_watch_read(files.descriptor, events, GC_WATCH_READ_CAPACITY)
            if count <= 0 { return }  // -EAGAIN: all read
            for i in 0..<Int(count) {
                let event = events[i]
                if event.events & GC_WATCH_OVERFLOW != 0 {
                    for watch in files.watches.values {
                        for registration in watch.registrations { report(event, to: registration) }
                    }
                    continue
                }
                guard let watch = files.watches[event.watch] else { continue }  // removed
                if event.events & GC_WATCH_IGNORED != 0 {
                    // The kernel dropped the watch (the inode is gone, or unmounted).
                    watch.isLive = false
                    files.watches[event.watch] = nil
                    continue
                }
                for registration in watch.registrations { report(event, to: registration) }
            }
        }
    }

    /// Works out which changes `event` means for `registration` and calls its handler.
    private func report(_ event: gc_watch_event_t, to registration: FileRegistration) {
        var now = gc_file_status_t()
        let hasNow = gc_file_status(registration.descriptor, &now) == 0
        let before = registration.hasLast ? registration.last : nil
        let after = hasNow ? now : nil
        var seen: FileChanges = []
        let kernel = event.events
        if kernel & GC_WATCH_OVERFLOW != 0 {
            if let before, let after {
                if after.size != before.size || after.mtime_ns != before.mtime_ns { seen.insert(.write) }
                if after.size > before.size { seen.insert(.extend) }
                if FileWatchTable.attributesDiffer(before, after) { seen.insert(.attrib) }
            }
        } else if event.is_child != 0 {
            if kernel & FileChanges.entryEvents != 0 { seen.insert(.write) }
        } else {
            if kernel & GC_WATCH_MODIFY != 0 {
                seen.insert(.write)
                if let before, let after, after.size > before.size { seen.insert(.extend) }
            }
            if kernel & GC_WATCH_ATTRIB != 0 {
                // A link or unlink also sends IN_ATTRIB; it is an attribute change only if
                // something besides the link count changed (or fstat cannot tell).
                let linksOnly: Bool
                if let before, let after {
                    linksOnly = after.links != before.links && !FileWatchTable.attributesDiffer(before, after)
                } else {
                    linksOnly = false
                }
                if !linksOnly { seen.insert(.attrib) }
            }
            if kernel & GC_WATCH_DELETE_SELF != 0 { seen.insert(.delete) }
            if kernel & GC_WATCH_MOVE_SELF != 0 { seen.insert(.rename) }
            if kernel & GC_WATCH_UNMOUNT != 0 { seen.insert(.revoke) }
        }
        if let before, let after, after.links != before.links {
            seen.insert(.link)
            if after.links == 0 { seen.insert(.delete) }
        }
        if hasNow {
            registration.last = now
            registration.hasLast = true
        }
        seen.formIntersection(registration.changes)
        if !seen.isEmpty { registration.handler(registration.context, seen.rawValue) }
    }
}

extension FileWatchTable {
    /// Whether metadata other than the size and link count differs: mode, owner, times
    /// set by utimes (a write moves mtime too, but it comes with IN_MODIFY, not IN_ATTRIB).
    static func attributesDiffer(_ a: gc_file_status_t, _ b: gc_file_status_t) -> Bool {
        a.mode != b.mode || a.uid != b.uid || a.gid != b.gid || a.atime_ns != b.atime_ns || a.mtime_ns != b.mtime_ns
    }
}
