import CGrandCentral
import Glibc
import Synchronization

// Descriptor readiness on the event thread: what read and write sources (and stream I/O)
// are built on.
//
// Protocol, per registration (one interest, read or write, on one descriptor):
//   register → armed; the first readiness calls `handler(context, events)` on the event
//   thread and disarms the registration; `rearmDescriptor` arms it again (a source does
//   so once its handler has run, so readiness is level-triggered from the source's point
//   of view, and no event is reported twice while the handler still runs);
//   `unregisterDescriptor` removes it and then calls `completion(context)` on the event
//   thread: after that call the handler is never called again, so the owner may now
//   deliver its cancel handler and the client may close the descriptor.
//
// All registrations on one descriptor share one epoll registration (epoll allows one per
// descriptor), a `DescriptorTable.Entry`, armed with EPOLLONESHOT for the union of its
// armed registrations' interests: the kernel disables the descriptor after each report,
// and the loop re-enables it for the registrations still armed. Rejected: edge-triggered
// epoll (a handler that reads less than all the data would never hear again) and plain
// level-triggered epoll (the loop would spin on a readable descriptor until the source's
// handler, on another thread, drains it).
//
// Generations. The epoll data of an entry is `generation << 32 | fd`, with a generation
// that is new for every entry. When a descriptor is unregistered, closed and its number
// reused for a new registration, an event that the kernel reported for the old
// registration (already in the array epoll_wait returned, or racing with the change)
// carries the old generation and is dropped, instead of being delivered to the new
// registration or, as in libdispatch's epoll code, through a pointer to freed memory.
// The data holds no pointer: an event is looked up in the table, never dereferenced.
//
// Reused numbers. A client may close a watched descriptor and open another file under the
// same number without cancelling the first source. Each entry remembers which file it
// watches (`identity`: device and inode); a registration for a different file under the
// same number retires the old entry (it leaves the table with its generation, keeps its
// registrations, which never hear again, and is never touched in epoll again: the kernel
// dropped its interest when the file was closed) and starts a new one. So the old source
// neither steals the new file's events nor loses its own (it has none left).
//
// Descriptors epoll cannot watch (regular files and directories: EPERM) are always
// ready, as in libdispatch: an armed registration on them is reported at once. A
// descriptor epoll rejects for another reason (EBADF: not open) reports GC_POLL_ERR once
// to each registration (the world's fault, delivered through the error channel, not a
// crash), and then stays silent: re-arming does not report it again, so a client that
// ignores the error does not spin a thread and the event loop.

/// What a registration waits for.
enum DescriptorInterest: Sendable {
    case read
    case write

    /// The epoll events this interest is reported for (error and hang-up always are).
    var pollEvents: UInt32 {
        switch self {
        case .read: return GC_POLL_IN | GC_POLL_RDHUP
        case .write: return GC_POLL_OUT
        }
    }

    /// Which reported bits concern a registration with this interest.
    var relevantEvents: UInt32 { pollEvents | GC_POLL_ERR | GC_POLL_HUP }
}

/// Called on the event thread with the registration's context and the GC_POLL_* bits
/// that were reported (readable/writable, error, hang-up).
typealias DescriptorHandler = @convention(c) (UnsafeMutableRawPointer?, UInt32) -> Void

/// One interest in one descriptor.
///
/// Fields and who may touch them:
/// - `descriptor`, `interest`, `handler`, `context`: immutable after init.
/// - `rearmRequested`: shared, atomic; true while the registration sits in the rearm inbox
///   (a producer pushes only when it flips it false → true; the event thread clears it
///   after taking the node, so the node is in that inbox at most once).
/// - `rearmLink`: the rearm inbox's link (written by the pusher, read by the event thread,
///   ordered by the inbox's atomics).
/// - `isRegistered`, `isArmed`, `entry`: the event thread only.
final class DescriptorRegistration: @unchecked Sendable {
    let descriptor: Int32
    let interest: DescriptorInterest
    let handler: DescriptorHandler
    let context: UnsafeMutableRawPointer?

    let rearmRequested = Atomic<Bool>(false)
    var rearmLink: UnsafeMutableRawPointer?

    var isRegistered = false
    var isArmed = false
    /// It was told its descriptor cannot be watched at all (a synthetic GC_POLL_ERR).
    var errorReported = false
    /// The entry this registration joined (it stays with a retired entry).
    var entry: DescriptorTable.Entry?

    init(descriptor: Int32, interest: DescriptorInterest, handler: DescriptorHandler,
         context: UnsafeMutableRawPointer?) {
        self.descriptor = descriptor
        self.interest = interest
        self.handler = handler
        self.context = context
    }
}

/// A registration, for `rearmDescriptor` and `unregisterDescriptor`.
typealias DescriptorToken = RegistrationToken<DescriptorRegistration>

enum DescriptorRearmLink: EventLoopInboxLink {
    static func next(of node: DescriptorRegistration) -> UnsafeMutableRawPointer? { node.rearmLink }
    static func setNext(of node: DescriptorRegistration, to next: UnsafeMutableRawPointer?) { node.rearmLink = next }
}

/// The registered descriptors, by number. Owned by the event thread; it does no system
/// calls itself (the loop does, see `EventLoop.updatePoll`), so its bookkeeping, the
/// generations above all, can be tested on its own.
struct DescriptorTable {
    /// The registrations on one descriptor, sharing one epoll registration.
    final class Entry {
        let descriptor: Int32
        /// Identifies this entry in epoll data; never 0, never reused while it lives.
        let generation: UInt32
        /// The file it watches (`gc_descriptor_identity`, 0 for a descriptor not open).
        let identity: UInt64
        /// Left the table because its number now names another file: nothing is armed
        /// for it in epoll again.
        var isRetired = false
        var registrations: [DescriptorRegistration] = []
        /// Whether the descriptor is in the epoll set (ADD done, no DEL since).
        var inPoll = false
        /// The events the kernel will report next: 0 after a one-shot report, or when
        /// disabled.
        var kernelEvents: UInt32 = 0
        /// Nonzero when epoll cannot watch the descriptor: the events armed registrations
        /// get at once (readable and writable for a regular file, error for a bad one).
        var syntheticEvents: UInt32 = 0

        init(descriptor: Int32, generation: UInt32, identity: UInt64) {
            self.descriptor = descriptor
            self.generation = generation
            self.identity = identity
        }

        /// The union of the armed registrations' interests.
        var armedEvents: UInt32 {
            var events: UInt32 = 0
            for registration in registrations where registration.isArmed {
                events |= registration.interest.pollEvents
            }
            return events
        }
    }

    private var entries: [Int32: Entry] = [:]
    private var nextGeneration: UInt32 = 1
    /// Entries with synthetic events that may have armed registrations to report to.
    var syntheticPending: [Entry] = []

    var count: Int { entries.count }

    /// Adds `registration`, armed, to its descriptor's entry (a new entry, with a new
    /// generation, if the descriptor had none, or if its entry watches another file than
    /// `identity` says: that entry is retired, see the file comment). Returns the entry.
    mutating func add(_ registration: DescriptorRegistration, identity: UInt64 = 0) -> Entry {
        let entry: Entry
        if let existing = entries[registration.descriptor], existing.identity == identity {
            entry = existing
        } else {
            if let stale = entries[registration.descriptor] {
                stale.isRetired = true
                stale.inPoll = false
                stale.kernelEvents = 0
            }
            entry = Entry(descriptor: registration.descriptor, generation: nextGeneration, identity: identity)
            nextGeneration = nextGeneration == UInt32.max ? 1 : nextGeneration + 1
            entries[registration.descriptor] = entry
        }
        entry.registrations.append(registration)
        registration.entry = entry
        registration.isRegistered = true
        registration.isArmed = true
        return entry
    }

    /// Removes `registration`. Returns its entry, and whether the entry is now empty (in
    /// which case it has left the table and its generation is retired).
    mutating func remove(_ registration: DescriptorRegistration) -> (entry: Entry, isEmpty: Bool)? {
        guard registration.isRegistered, let entry = registration.entry else { return nil }
        entry.registrations.removeAll { $0 === registration }
        registration.isRegistered = false
        registration.isArmed = false
        registration.entry = nil
        if entry.registrations.isEmpty {
            if entries[registration.descriptor] === entry { entries[registration.descriptor] = nil }
            return (entry, true)
        }
        return (entry, false)
    }

    /// The entry an epoll event is for, or nil when the event is stale: the descriptor
    /// has no entry any more, or a different one (its number was reused).
    func entry(descriptor: Int32, generation: UInt32) -> Entry? {
        guard let entry = entries[descriptor], entry.generation == generation else { return nil }
        return entry
    }

    /// The entry of a registered registration (possibly retired).
    func entry(of registration: DescriptorRegistration) -> Entry? {
        registration.isRegistered ? registration.entry : nil
    }
}

extension EventLoop {
    // MARK: - Descriptor API (any thread)

    /// Registers interest in `descriptor` becoming readable or writable. The handler is
    /// called on the event thread at the first readiness, then not again until
    /// `rearmDescriptor`. Any thread.
    func registerDescriptor(_ descriptor: Int32, interest: DescriptorInterest,
                            handler: DescriptorHandler, context: UnsafeMutableRawPointer?) -> DescriptorToken {
        let token = makeDescriptorRegistration(descriptor, interest: interest, handler: handler, context: context)
        registerDescriptor(token)
        return token
    }

    /// The first half of `registerDescriptor`: a token that is not registered yet, for an
    /// owner that must store the token before the handler can first be called (which may
    /// happen on the event thread before `registerDescriptor` returns). Any thread.
    func makeDescriptorRegistration(_ descriptor: Int32, interest: DescriptorInterest,
                                    handler: DescriptorHandler, context: UnsafeMutableRawPointer?) -> DescriptorToken {
        DescriptorToken(registration: DescriptorRegistration(descriptor: descriptor, interest: interest,
                                                             handler: handler, context: context))
    }

    /// The second half: registers a token from `makeDescriptorRegistration`, once. Any thread.
    func registerDescriptor(_ token: DescriptorToken) {
        descriptorInbox.register(token.registration)
        requestWakeup()
    }

    /// Asks for the next readiness of a registration whose handler was called. Ignored
    /// for a registration that is armed already or unregistered. Any thread.
    func rearmDescriptor(_ token: DescriptorToken) {
        let registration = token.registration
        if !registration.rearmRequested.exchange(true, ordering: .sequentiallyConsistent) {
            rearmInbox.push(registration)
            requestWakeup()
        }
    }

    /// Unregisters; then calls `completion(context)` on the event thread, after which the
    /// handler is never called again. Call at most once per token. Any thread.
    func unregisterDescriptor(_ token: DescriptorToken, completion: DispatchFunction,
                              context: UnsafeMutableRawPointer?) {
        descriptorInbox.unregister(token.registration, completion: completion, context: context)
        requestWakeup()
    }

    // MARK: - Event thread

    func drainDescriptorInboxes() {
        descriptorInbox.drain(register: { registration in
            let entry = descriptors.add(registration, identity: gc_descriptor_identity(registration.descriptor))
            updatePoll(entry)
        }, unregister: { registration in
            guard let (entry, isEmpty) = descriptors.remove(registration), !entry.isRetired else { return }
            if isEmpty {
                if entry.inPoll {
                    // ENOENT/EBADF when the client closed the descriptor first: the
                    // kernel already dropped it. Either way it is gone.
                    _ = gc_poll_control(poll, GC_POLL_DEL, entry.descriptor, 0, 0)
                    entry.inPoll = false
                }
            } else {
                updatePoll(entry)
            }
        })
        rearmInbox.drain { registration in
            // Cleared after the node left the inbox (the walk already read its link), so a
            // new request pushes it again.
            registration.rearmRequested.store(false, ordering: .sequentiallyConsistent)
            guard registration.isRegistered, !registration.isArmed,
                  let entry = descriptors.entry(of: registration) else { return }
            registration.isArmed = true
            updatePoll(entry)
        }
    }

    /// A readiness report from epoll.
    func deliverReadiness(descriptor: Int32, generation: UInt32, events: UInt32) {
        guard let entry = descriptors.entry(descriptor: descriptor, generation: generation) else {
            return  // stale: for a registration that is gone
        }
        entry.kernelEvents = 0  // EPOLLONESHOT disabled it
        deliver(events, to: entry)
        updatePoll(entry)
    }

    /// Reports synthetic readiness to armed registrations on descriptors epoll cannot
    /// watch.
    func deliverSyntheticReadiness() {
        guard !descriptors.syntheticPending.isEmpty else { return }
        let pending = descriptors.syntheticPending
        descriptors.syntheticPending.removeAll(keepingCapacity: true)
        for entry in pending where descriptors.entry(descriptor: entry.descriptor, generation: entry.generation) === entry {
            deliver(entry.syntheticEvents, to: entry, synthetic: true)
        }
    }

    private func deliver(_ events: UInt32, to entry: DescriptorTable.Entry, synthetic: Bool = false) {
        let unwatchable = synthetic && events == GC_POLL_ERR
        for registration in entry.registrations where registration.isArmed {
            if unwatchable && registration.errorReported { continue }  // told once already
            let relevant = events & registration.interest.relevantEvents
            if relevant != 0 {
                registration.isArmed = false
                if unwatchable { registration.errorReported = true }
                registration.handler(registration.context, relevant)
                descriptorPolling.delivered = true
            }
        }
    }

    /// Brings the kernel's view of `entry` in line with its armed registrations.
    private func updatePoll(_ entry: DescriptorTable.Entry) {
        if entry.isRetired { return }  // its file is gone; the number belongs to another
        let wanted = entry.armedEvents
        if entry.syntheticEvents != 0 {
            let unwatchable = entry.syntheticEvents == GC_POLL_ERR
            if entry.registrations.contains(where: { $0.isArmed && !(unwatchable && $0.errorReported) }) {
                descriptors.syntheticPending.append(entry)
            }
            return
        }
        if wanted == entry.kernelEvents { return }
        let data = EventLoop.data(descriptor: entry.descriptor, generation: entry.generation)
        if wanted == 0 {
            // Nothing armed but the kernel would still report (at least an error or a
            // hang-up): take the descriptor out until something is armed again.
            _ = gc_poll_control(poll, GC_POLL_DEL, entry.descriptor, 0, 0)
            entry.inPoll = false
            entry.kernelEvents = 0
            return
        }
        let oneShot = wanted | GC_POLL_ONESHOT
        var rc: Int32
        if entry.inPoll {
            rc = gc_poll_control(poll, GC_POLL_MOD, entry.descriptor, oneShot, data)
            if rc == -ENOENT {
                // The client closed the descriptor (and perhaps opened another under the
                // same number) without unregistering; the kernel forgot it.
                rc = gc_poll_control(poll, GC_POLL_ADD, entry.descriptor, oneShot, data)
            }
        } else {
            rc = gc_poll_control(poll, GC_POLL_ADD, entry.descriptor, oneShot, data)
            if rc == -EEXIST {
                rc = gc_poll_control(poll, GC_POLL_MOD, entry.descriptor, oneShot, data)
            }
        }
        if rc == 0 {
            entry.inPoll = true
            entry.kernelEvents = wanted
        } else {
            entry.inPoll = false
            entry.kernelEvents = 0
            entry.syntheticEvents = rc == -EPERM ? GC_POLL_IN | GC_POLL_OUT : GC_POLL_ERR
            descriptors.syntheticPending.append(entry)
        }
    }
}

// MARK: - Polling after a delivery

/// The event thread's half of the handler hop: after a pass that reported readiness, the
/// loop keeps polling (`epoll_wait` with a zero timeout) for a short window instead of
/// sleeping, so the next readiness on a busy descriptor (a reply on a socket, the next
/// message on a pipe) is seen without the kernel having to wake a sleeping thread.
///
/// Why. Pipe write → read-source handler entry (bench pipe_p50, 2 CPUs) was 8.0-8.5 µs in
/// both libraries, and a stage trace put 5.7 µs of GrandCentral's in the kernel's wakeup of
/// the event thread out of `epoll_wait`, 0.7 µs in the loop's delivery (the merge, the
/// push onto the target, the root queue's wake of a worker) and 1.5 µs from there to the
/// handler. With the window: 7.4 → 3.1 µs p50 with the process's threads given the CPUs
/// (`chrt -f 10`, standing in for an idle machine: the one measured on was loaded by other
/// builds); under plain CFS at load 5-20 the contention rule below turns polling off and
/// the p50 stays where it was (7.8-8.2 µs, alternating builds).
///
/// When. Only while it costs no runnable thread its CPU:
/// - the process has at least two CPUs and fewer pool workers running (not parked, not
///   blocked) than CPUs, so the polling thread takes a CPU the pool is not using;
/// - the event thread is not kept waiting for a CPU while it polls: it compares the wall
///   time it has polled with the CPU time it got (`gc_thread_cpu_ns`), when a window closes
///   and every `recheck` while windows keep being extended; if more than a quarter of the
///   time went to other threads, the CPUs are contended (by this process or another) and
///   polling stops for `backoff`. A short preemption (the thread the handler woke, taking
///   the CPU for the microsecond it needs to write the next message) does not stop it.
/// A window is `window` long from the last pass that delivered; each poll is a pass of the
/// loop (timers, inboxes) like any other, so nothing waits longer than it would have.
///
/// The wakeup. While polling the loop holds `wakeupPending` itself, so a thread that hands
/// it something (the re-arm a read source asks for when its handler returns, a timer)
/// skips the eventfd write: the next poll empties the inboxes. Closing a window clears the
/// flag and then looks at the inboxes again (both sequentially consistent): a producer that
/// saw the flag set pushed before the clear, so its node is seen there and served by one
/// more pass (the producer's push-then-exchange against the loop's store-then-look, as in
/// `EventLoop`'s wakeup protocol). The pool's yielding workers count as spinners meanwhile
/// (`ThreadPool.yieldersTakeWork`), so a delivery does not wake a parked worker while the
/// one that ran the last handler is still looking for work.
///
/// Cost: at most `window` of one CPU after each delivery, and only on an otherwise idle
/// CPU; nothing while no descriptor is ready (an idle process never polls). On contended
/// CPUs, one try per `backoff`, which costs at most `recheck` of polling: 2% of a CPU
/// while events keep coming (a 100 ms backoff kept polling off for a whole 2,000-message
/// run after one busy moment; 10 ms lets it come back when the machine calms). Rejected:
/// sched_yield between polls (under load it gave the CPU away for whole slices: 8 → 13 µs
/// p50 at load 20), stopping at any involuntary switch (getrusage's ru_nivcsw: on 2 CPUs
/// the handler's own wake of the writer preempts the poller every round, which then never
/// polled), and a longer window (the round trip of a request-reply pair on 2 CPUs is 10-20
/// µs; the window only has to cover that).
struct DescriptorPolling {
    /// How long after the last delivery the loop polls (ns).
    static let window: UInt64 = 30_000
    /// How long polling stays off once the CPUs were found contended (ns).
    static let backoff: UInt64 = 10_000_000
    /// While windows keep being extended, how often the CPU time is compared again (ns).
    static let recheck: UInt64 = 200_000

    /// This pass reported readiness to a registration.
    var delivered = false
    /// The end of the current window (uptime, ns), or 0 when not polling.
    var until: UInt64 = 0
    /// When the CPU time was last read (uptime, ns), and what it was.
    var checkedAt: UInt64 = 0
    var cpuAtCheck: UInt64 = 0
    /// Polling is off until then (uptime, ns).
    var offUntil: UInt64 = 0
}

extension EventLoop {
    /// After each pass, with the timeout the loop would wait with (-1: none): 0 to poll
    /// (see `DescriptorPolling`), else that timeout. Called whatever the timeout, so a
    /// window always closes and gives the wakeup back. Event thread only.
    func descriptorPollTimeout(_ timeout: Int32) -> Int32 {
        if timeout == 0 || (!descriptorPolling.delivered && descriptorPolling.until == 0) { return timeout }
        let now = gc_uptime_ns()
        if descriptorPolling.delivered {
            descriptorPolling.delivered = false
            if now >= descriptorPolling.offUntil && poolLeavesACPUFree() {
                if descriptorPolling.until == 0 {
                    descriptorPolling.checkedAt = now
                    descriptorPolling.cpuAtCheck = gc_thread_cpu_ns()
                }
                descriptorPolling.until = now &+ DescriptorPolling.window
            }
        }
        guard descriptorPolling.until != 0 else { return timeout }
        let polled = now &- descriptorPolling.checkedAt
        if now < descriptorPolling.until && polled < DescriptorPolling.recheck { return keepPolling() }
        let cpu = gc_thread_cpu_ns()
        let ran = cpu &- descriptorPolling.cpuAtCheck
        if ran < polled && (polled - ran) * 4 > polled {
            descriptorPolling.offUntil = now &+ DescriptorPolling.backoff
        } else if now < descriptorPolling.until {
            descriptorPolling.checkedAt = now
            descriptorPolling.cpuAtCheck = cpu
            return keepPolling()
        }
        descriptorPolling.until = 0
        ThreadPool.shared.yieldersTakeWork.store(false, ordering: .relaxed)
        // Then look (see `DescriptorPolling`, the wakeup): a node pushed by a producer that
        // saw the flag set is served by one more pass.
        wakeupPending.store(false, ordering: .sequentiallyConsistent)
        let inboxesEmpty = timerInbox.isEmpty && descriptorInbox.isEmpty && rearmInbox.isEmpty
            && fileInbox.isEmpty && signalInbox.isEmpty
        // A failed worker start also asks for a wakeup (ThreadStartFailures.workerStartFailed:
        // its sequentially consistent CAS of `since`, then the look at `wakeupPending`):
        // one more pass serves the episode (`serveWhileWorkersCannotStart`).
        let startFailureOpen = ThreadStartFailures.shared.since.load(ordering: .sequentiallyConsistent) != 0
        return inboxesEmpty && !startFailureOpen ? timeout : 0
    }

    /// One more poll: the loop holds the wakeup, and yielding workers count as spinners.
    /// Each is stored only when not set already (producers read both lines).
    private func keepPolling() -> Int32 {
        if !wakeupPending.load(ordering: .sequentiallyConsistent) {
            wakeupPending.store(true, ordering: .sequentiallyConsistent)
        }
        let pool = ThreadPool.shared
        if !pool.yieldersTakeWork.load(ordering: .relaxed) { pool.yieldersTakeWork.store(true, ordering: .relaxed) }
        return 0
    }

    /// Whether the pool leaves a CPU to a polling event thread: two CPUs or more, and fewer
    /// workers running (neither parked nor blocked) than CPUs. Relaxed loads: a heuristic.
    func poolLeavesACPUFree() -> Bool {
        let pool = ThreadPool.shared
        if pool.activeCPUs < 2 { return false }
        let running = pool.threads.load(ordering: .relaxed) - pool.idle.load(ordering: .relaxed)
            - pool.blocked.load(ordering: .relaxed)
        return running < pool.activeCPUs
    }
}
