import CGrandCentral
import Glibc
import Synchronization

/// The event thread: one thread, started on first use, that waits in `epoll_wait` for
/// everything the library waits on without a worker: timers (`dispatch_after`, timer
/// sources; EventLoopTimers.swift), descriptor readiness (read/write sources, stream I/O),
/// process exits (pidfds), file changes (inotify, vnode sources) and signals (signalfd).
/// Each kind of registration is a file of its own beside this one (`EventLoop…`); they
/// reach the event thread through the inboxes of EventLoopInbox.swift.
///
/// What it waits on:
/// - one eventfd, the wakeup: other threads write it after handing the loop something new;
/// - one timerfd per clock (uptime: CLOCK_MONOTONIC, wall: CLOCK_REALTIME, boot:
///   CLOCK_BOOTTIME), each made at load and taken with its clock's first timer, armed at
///   an absolute instant: the wakeup A that the timer policy chooses for that clock's
///   timers (never early, a lone timer at its deadline, leeway only to share a wakeup; see
///   `TimerHeap`). The wall
///   timerfd also asks for TFD_TIMER_CANCEL_ON_SET, so setting the system clock wakes the
///   loop to re-evaluate;
/// - the descriptors of registered sources (see EventLoopDescriptors.swift), process
///   sources' pidfds among them (EventLoopProcesses.swift);
/// - one inotify descriptor for vnode sources, created on first use, with its watch table
///   (`files`, event thread only; see EventLoopFiles.swift);
/// - the signalfd of signal sources, with generation 0 (see EventLoopSignals.swift).
///
/// When the descriptors are made. A constructor in CGrandCentral (`gc_event_take_reserved`,
/// event.c) makes the epoll instance, the wakeup eventfd, the three timerfds and an empty
/// signalfd when the library is loaded, before the program's `main`, and registers the
/// timerfds and the signalfd with the epoll; this loop (and its thread) is made on first
/// use and takes them. So a program that fills its descriptor table (RLIMIT_NOFILE) before
/// or after its first timer still has `dispatch_after`, timer sources and signal sources:
/// none of them needs a new descriptor. The cost is 6 descriptors and 10 system calls per
/// process, about 17 µs of system time with their closing at exit (measured: a loop of the
/// same calls, best of 5 × 20,000), against about 1.6 ms for a trivial C program linked to
/// the library to start and exit (`perf stat -r 400`: the difference was within the noise).
/// Rejected: first queue use (a program that fills its table before its first dispatch
/// call, as a server that opens its sockets first does, would still die at its first
/// timer) and starting the thread at load too (a thread in every process that merely links
/// the library). What stays lazy needs a descriptor per use and reports its failure through
/// its source instead (source.h): the inotify instance (vnode sources; inotify instances
/// are a per-user resource, 128 by default, not to be taken by every process) and each
/// process source's pidfd. A child forked before the first use makes its own set (the
/// epoll instance would be shared with the parent); it then needs free descriptors.
///
/// Ownership. The timer heaps, the timerfds' armed instants and the descriptor table
/// belong to the event thread: only it reads or writes them, so they need no lock. Other
/// threads talk to it through inboxes (`EventLoopInbox`: lock-free stacks it empties at
/// once) and then, if needed, a wakeup.
///
/// Wakeups are coalesced twice:
/// 1. `wakeupPending` is set by the first thread that writes the eventfd and cleared by the
///    event thread just before it empties the inboxes, so many submissions between two
///    passes of the loop cost one write(2). A producer that finds it already set relies on
///    the pass that will clear it: push → exchange(flag) on the producer, store(flag) →
///    take(inbox) on the event thread, all sequentially consistent, so a producer that
///    saw `true` pushed before the clear, and the take that follows sees its node.
/// 2. A new arm whose latest instant (deadline + leeway) is not earlier than what its
///    clock's timerfd is already armed for (`nextFire`) does not wake the loop at all:
///    the loop will empty the inbox when the timerfd expires, in time for the new timer
///    (it fires then if its deadline has passed, inside its window; otherwise the loop
///    arms for it). Suspending and disarming never wake the loop either: a node with a
///    request waiting is never fired (see `TimerNode`), and the loop applies the request
///    on its next pass. The race this invites (the loop is
///    between emptying the inbox and re-arming, with a later instant, when the producer
///    reads the old one) is closed by the loop checking the inboxes again after it
///    publishes `nextFire`: "producer: push, then load nextFire" against "event thread:
///    store nextFire, then load the inbox", sequentially consistent, means at least one
///    side sees the other's write.
///
/// Priority and timer slack (what the wake-to-fire path depends on besides its own work).
/// The thread runs at libdispatch's manager value, nice -4, where the process may lower
/// nice values (`ThreadPriority.enterEventThread`; libdispatch's manager does the same,
/// seen with strace). Unprivileged, Linux offers a thread no higher priority than the one
/// it started at (RLIMIT_NICE and RLIMIT_RTPRIO are 0 by default), so there it keeps it.
/// Rejected: SCHED_FIFO/RR where permitted (a real-time thread that can spend tens of
/// milliseconds on a burst of 100,000 timers, and a policy the process never asked for;
/// libdispatch does not either). Timer slack (PR_SET_TIMERSLACK) stays at the default
/// 50 µs, as on libdispatch's threads (no prctl seen): the timerfds are hrtimers the
/// kernel arms with no slack range and the thread waits in epoll_wait without a timeout
/// (it has one only while no worker can start), so slack delays none of its wakeups
/// (measured, a 1 ms absolute timerfd: 27-40 µs late at p50 with 50 µs slack and with
/// 1 ns alike; an epoll_wait timeout of 1 ms: 83 µs late with 50 µs slack, 33 µs with 1 ns).
///
/// Debug lines (`GRANDCENTRAL_DEBUG`, `DebugLog`): one per timerfd re-arm or disarm in
/// `armTimerDescriptors`, none per timer; `debug` is read once, at init.
///
/// Handlers never run here. The callbacks this thread calls are the engine's (a queue's
/// "timer fired" or "descriptor ready" function), and they only push work onto a queue.
final class EventLoop: @unchecked Sendable {
    /// The process's event loop, created (and its thread started) on first use. Replaced
    /// only in the child of a fork (Runtime/Fork.swift), where the parent's event thread
    /// does not exist. An unmanaged retained reference, loaded acquiring: the loop was
    /// fully initialised before it was published (releasing).
    static var shared: EventLoop {
        let bits = installed.load(ordering: .acquiring)
        if bits != 0 { return Unmanaged<EventLoop>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue() }
        return installShared()
    }
    /// The loop's address (an unmanaged retained reference), or 0 before the first use.
    private static let installed = Atomic<UInt>(0)
    private static let installLock = SpinLockBox()

    @inline(never)
    private static func installShared() -> EventLoop {
        installLock.lock.lock()
        defer { installLock.lock.unlock() }
        let bits = installed.load(ordering: .acquiring)
        if bits != 0 { return Unmanaged<EventLoop>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue() }
        let loop = EventLoop()
        installed.store(UInt(bitPattern: Unmanaged.passRetained(loop).toOpaque()), ordering: .releasing)
        return loop
    }

    /// The child of a fork: the parent's loop has no thread here, and its descriptors are
    /// shared with the parent's (an epoll instance, eventfd and timerfds are open file
    /// descriptions that fork does not copy). Close the child's copies, forget the loop
    /// (never freed: its registrations and timers are the parent's), and let the next use
    /// create a loop of the child's own. Single-threaded; no allocation, no locks.
    static func forgetInForkChild() {
        installLock.lock.resetInForkChild()
        let bits = installed.exchange(0, ordering: .relaxed)
        if bits == 0 { return }
        let loop = Unmanaged<EventLoop>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue()
        _ = close(loop.poll)
        _ = close(loop.wakeupDescriptor)
        for descriptor in loop.timerDescriptors where descriptor >= 0 { _ = close(descriptor) }
    }

    // MARK: Immutable after init

    let poll: Int32
    private let wakeupDescriptor: Int32
    /// `DebugLog.enabled`, copied at init (a stored flag, not a lazy global).
    let debug: Bool

    // MARK: Shared between threads (atomics only)

    /// Timers whose request changed (arm, suspend, resume, disarm, cancel).
    let timerInbox = EventLoopInbox<TimerInboxLink>()
    /// Spent one-shot timer nodes for `scheduleOneShot` (TimerNode.swift).
    let oneShotPool = TimerNodePool()
    /// Descriptor registrations and unregistrations, in submission order.
    let descriptorInbox = RegistrationInbox<DescriptorRegistration>()
    /// Registrations whose owner asked to be told about readiness again.
    let rearmInbox = EventLoopInbox<DescriptorRearmLink>()
    /// Vnode sources' registrations and unregistrations (EventLoopFiles.swift).
    let fileInbox = RegistrationInbox<FileRegistration>()
    /// Signal registrations and unregistrations, in submission order.
    let signalInbox = RegistrationInbox<SignalRegistration>()
    /// The event thread's kernel thread id, 0 until it has blocked every signal (see
    /// EventLoopSignals.swift). Stored once by the event thread.
    let kernelThreadID = Atomic<Int32>(0)
    /// The event thread was created (set once, by `startThread`).
    private let threadStarted = Atomic<Bool>(false)
    /// A `startThread` is in progress.
    private let threadStarting = Atomic<Bool>(false)
    /// True between a write to the eventfd and the pass of the loop that consumes it; also
    /// held by the loop itself while it polls after a delivery (EventLoopDescriptors.swift,
    /// `DescriptorPolling`), when every pass empties the inboxes anyway.
    let wakeupPending = Atomic<Bool>(false)
    /// Per clock: the absolute instant its timerfd is armed for, or `UInt64.max` when it
    /// is disarmed. Written by the event thread, read by `scheduleTimer`.
    let nextFireUptime = Atomic<UInt64>(UInt64.max)
    let nextFireWall = Atomic<UInt64>(UInt64.max)
    let nextFireBoot = Atomic<UInt64>(UInt64.max)
    /// The event thread's `pthread_self()`, 0 until it starts. Stored once by the event
    /// thread and read by timer requests, which skip the wakeup when they run there (the
    /// loop checks its inbox again before it waits). Relaxed suffices: a thread that reads
    /// 0 or another thread's id is not the event thread and wakes it, which is always safe.
    private let eventThread = Atomic<UInt>(0)
    /// Passes of the loop that fired at least one timer: the wakeups timers cost (tests
    /// count them to check coalescing). Relaxed: a statistic, written by the event thread.
    let timerFiringPasses = Atomic<Int>(0)

    // MARK: Event thread only

    var heaps = [TimerHeap](repeating: TimerHeap(), count: DispatchClock.Kind.allCases.count)
    /// The timerfd of each clock, or -1 until a timer on that clock arrives.
    var timerDescriptors = [Int32](repeating: -1, count: DispatchClock.Kind.allCases.count)
    /// Per clock, the timerfd made when the library was loaded and already in the epoll
    /// (`gc_event_take_reserved`), which `timerDescriptors` takes with the clock's first
    /// timer; a negative errno when there is none (then that timer creates one).
    let reservedTimerDescriptors: [Int32]
    /// The empty signalfd made when the library was loaded and already in the epoll, which
    /// the first signal source takes (EventLoopSignals.swift); a negative errno if none.
    let reservedSignalDescriptor: Int32
    /// The instant each timerfd is armed for, 0 when disarmed.
    var armedInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Bit k: clock k's timerfd expired in this pass and was not read. The uptime and boot
    /// timerfds are not read when they expire (a read(2) on the way to the fire): the pass
    /// re-arms them, which resets the expiry, and `armTimerDescriptors` reads one that it
    /// does not re-arm. The wall timerfd is read at once, for its ECANCELED.
    var unreadExpirations: UInt8 = 0
    /// Per clock, the wakeup A the loop approaches by polling when its timerfd was armed
    /// early for it (EventLoopTimers.swift, `TimerApproach`), else 0.
    var approachInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// The approach in progress, if any (EventLoopTimers.swift).
    var timerApproach = TimerApproach()
    /// Each clock as read at the start of the current pass (0 before its first timer).
    var passInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Registered descriptors (see EventLoopDescriptors.swift).
    var descriptors = DescriptorTable()
    /// Whether the loop polls after a delivery (see EventLoopDescriptors.swift).
    var descriptorPolling = DescriptorPolling()
    /// The inotify instance and its watches (see EventLoopFiles.swift).
    var files = FileWatchTable()
    /// Registered signals and the signalfd (see EventLoopSignals.swift).
    var signals = SignalTable()

    /// Creates the epoll instance and the wakeup eventfd and starts the event thread.
    /// Internal so that tests can run a loop of their own; the library uses `shared`.
    /// A loop's thread runs for the rest of the process.
    init() {
        Fork.install()
        debug = DebugLog.enabled
        var reserved = [Int32](repeating: -1, count: Int(GC_RESERVED_COUNT))
        reserved.withUnsafeMutableBufferPointer { gc_event_take_reserved($0.baseAddress) }
        poll = reserved[Int(GC_RESERVED_POLL)] >= 0
            ? reserved[Int(GC_RESERVED_POLL)] : EventLoop.check(gc_poll_create(), "epoll_create1")
        wakeupDescriptor = reserved[Int(GC_RESERVED_WAKEUP)] >= 0
            ? reserved[Int(GC_RESERVED_WAKEUP)] : EventLoop.check(gc_eventfd_create(), "eventfd")
        reservedTimerDescriptors = (0..<DispatchClock.Kind.allCases.count).map {
            reserved[Int(GC_RESERVED_TIMER_UPTIME) + $0]
        }
        reservedSignalDescriptor = reserved[Int(GC_RESERVED_SIGNAL)]
        _ = EventLoop.check(gc_poll_control(poll, GC_POLL_ADD, wakeupDescriptor, GC_POLL_IN,
                                            EventLoop.internalData(wakeupDescriptor)), "epoll_ctl")
        // A failed start is retried (ThreadStartFailures): by every wakeup request and by
        // the next worker start. Commands wait in the inboxes until the thread runs.
        _ = ensureThread()
    }

    /// Starts the event thread unless it runs; returns whether it runs. Any thread.
    @inline(__always)
    func ensureThread() -> Bool {
        if threadStarted.load(ordering: .acquiring) { return true }
        return startThread()
    }

    @inline(never)
    private func startThread() -> Bool {
        // One starter at a time; one that finds another starting leaves it to that one.
        if threadStarting.exchange(true, ordering: .acquiring) { return false }
        defer { threadStarting.store(false, ordering: .releasing) }
        if threadStarted.load(ordering: .acquiring) { return true }
        let context = Unmanaged.passRetained(self).toOpaque()
        let error = gc_thread_create({ raw in
            ThreadPriority.enterEventThread()
            Unmanaged<EventLoop>.fromOpaque(raw!).takeUnretainedValue().run()
        }, context, ThreadNames.event)
        if error != 0 {
            Unmanaged<EventLoop>.fromOpaque(context).release()
            if debug { DebugLog.timer("could not start the event thread: pthread_create: \(String(cString: strerror(error))); retrying at the next request") }
            return false
        }
        threadStarted.store(true, ordering: .releasing)
        return true
    }

    // MARK: - Wakeup

    /// Makes the event thread run a pass soon. Any thread.
    func requestWakeup() {
        if !wakeupPending.exchange(true, ordering: .sequentiallyConsistent) {
            _ = gc_eventfd_signal(wakeupDescriptor)
        }
        // Not started yet (pthread_create failed): try again; the eventfd stays readable.
        if !threadStarted.load(ordering: .relaxed) { _ = startThread() }
    }

    /// A wakeup, unless the caller is the event thread: it checks the inboxes again after
    /// the callbacks it runs, before it waits.
    @inline(__always)
    func requestWakeupFromAnyThread() {
        if eventThread.load(ordering: .relaxed) == pthread_self() { return }
        requestWakeup()
    }

    // MARK: - The loop (event thread only from here on)

    private func run() -> Never {
        let capacity: Int32 = 64
        let events = UnsafeMutablePointer<gc_poll_event_t>.allocate(capacity: Int(capacity))
        blockSignalsOnEventThread()
        eventThread.store(pthread_self(), ordering: .relaxed)
        var timeout: Int32 = -1
        var backoff: Int32 = 1
        while true {
            let count = gc_poll_wait(poll, events, capacity, timeout)
            if count < 0 {
                if count == -EINTR { continue }
                EventLoop.systemFailure("epoll_wait", count)
            }
            for i in 0..<Int(count) where EventLoop.generation(of: events[i].data) == 0 {
                handleInternal(EventLoop.descriptor(of: events[i].data))
            }
            // The clocks are read before the inboxes are emptied: a timer that arrives
            // after the drain can then only be overtaken by timers due before the reading,
            // that is, before it was scheduled. So timers scheduled ahead of their
            // deadlines fire in deadline order, wherever they were scheduled from.
            readClocks()
            // Inboxes before descriptor events: a registration change that arrived
            // together with an event for the old registration retires its generation
            // first, so the stale event is recognised and dropped.
            drainInboxes()
            for i in 0..<Int(count) where EventLoop.generation(of: events[i].data) != 0 {
                deliverReadiness(descriptor: EventLoop.descriptor(of: events[i].data),
                                 generation: EventLoop.generation(of: events[i].data),
                                 events: events[i].events)
            }
            var firedTimers = false
            while true {
                deliverSyntheticReadiness()
                if fireDueTimers() { firedTimers = true }
                // The timerfds are armed once the fires' own requests (a repeating timer's
                // next arm) are applied, and the inboxes are checked again after that
                // publishes `nextFire` (see the type's comment).
                if inboxesAreEmpty {
                    armTimerDescriptors()
                    if inboxesAreEmpty { break }
                }
                readClocks()
                drainInboxes()
            }
            if firedTimers { timerFiringPasses.add(1, ordering: .relaxed) }
            timeout = serveWhileWorkersCannotStart(backoff: &backoff)
            timeout = descriptorPollTimeout(timeout)
            timeout = timerApproachTimeout(timeout)
        }
    }

    /// An event on the eventfd, a timerfd, the signalfd or the inotify descriptor.
    private func handleInternal(_ descriptor: Int32) {
        if handleSignalDescriptor(descriptor) { return }
        if descriptor == wakeupDescriptor {
            _ = gc_eventfd_drain(wakeupDescriptor)
            // Before the inboxes are emptied (see the type's comment).
            wakeupPending.store(false, ordering: .sequentiallyConsistent)
            return
        }
        if descriptor == files.descriptor { return deliverFileEvents() }
        for kind in DispatchClock.Kind.allCases where timerDescriptors[kind.rawValue] == descriptor {
            if kind != .wall {
                unreadExpirations |= 1 << kind.rawValue
                continue
            }
            if gc_timerfd_drain(descriptor) == -ECANCELED {
                // The wall clock was set; the kernel disarmed the timer. Re-arm it.
                armedInstants[kind.rawValue] = 0
                if debug { DebugLog.timer("wall clock was set: the kernel disarmed its timerfd, re-arming") }
            }
        }
    }

    private var inboxesAreEmpty: Bool {
        timerInbox.isEmpty && descriptorInbox.isEmpty && rearmInbox.isEmpty && signalInbox.isEmpty
    }

    private func drainInboxes() {
        timerInbox.drain { node in applyTimerRequest(node) }
        drainDescriptorInboxes()
        drainFileInbox()
        drainSignalInbox()
    }

    // MARK: - epoll data

    // The 64-bit epoll data of a registration is `generation << 32 | descriptor`.
    // Generation 0 marks the loop's own descriptors (eventfd, timerfds); registrations
    // of sources get generations from 1 (see DescriptorTable).

    static func internalData(_ descriptor: Int32) -> UInt64 {
        UInt64(UInt32(bitPattern: descriptor))
    }

    static func data(descriptor: Int32, generation: UInt32) -> UInt64 {
        UInt64(generation) << 32 | UInt64(UInt32(bitPattern: descriptor))
    }

    static func generation(of data: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: data >> 32) }
    static func descriptor(of data: UInt64) -> Int32 { Int32(truncatingIfNeeded: data) }

    /// Setup system calls that fail leave the library unable to keep its promises (every
    /// `dispatch_after` would be lost), so they end the process with one clear line.
    static func check(_ result: Int32, _ call: StaticString) -> Int32 {
        if result < 0 { systemFailure(call, result) }
        return result
    }

    static func systemFailure(_ call: StaticString, _ negativeErrno: Int32) -> Never {
        let line = "GrandCentral: event thread: \(call) failed: \(String(cString: strerror(-negativeErrno)))\n"
        line.withCString { gc_write_stderr($0) }
        abort()
    }
}
