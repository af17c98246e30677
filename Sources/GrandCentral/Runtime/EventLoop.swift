import CGrandCentral
import Glibc
import Synchronization

/// The event thread: one thread, started on first use, that waits in `epoll_wait` for
/// everything the library waits on without a worker: timers (`dispatch_after`, timer
/// sources) and descriptor readiness (read/write sources, stream I/O). Signal, process and
/// vnode sources will add their descriptors (signalfd, pidfd, inotify) the same way.
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
/// Debug lines (`GRANDCENTRAL_DEBUG`, `DebugLog`): one per timerfd re-arm or disarm in
/// `serviceTimers`, none per timer; `debug` is read once, at init.
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
    private let debug: Bool

    // MARK: Shared between threads (atomics only)

    /// Timers whose request changed (arm, suspend, resume, disarm, cancel).
    private let timerInbox = EventLoopInbox<TimerInboxLink>()
    /// Descriptor registrations and unregistrations, in submission order.
    let descriptorInbox = EventLoopInbox<DescriptorCommandLink>()
    /// Registrations whose owner asked to be told about readiness again.
    let rearmInbox = EventLoopInbox<DescriptorRearmLink>()
    /// Vnode sources' registrations and unregistrations (EventLoopFiles.swift).
    let fileInbox = EventLoopInbox<FileCommandLink>()
    /// Signal registrations and unregistrations, in submission order.
    let signalInbox = EventLoopInbox<SignalCommandLink>()
    /// The event thread's kernel thread id, 0 until it has blocked every signal (see
    /// EventLoopSignals.swift). Stored once by the event thread.
    let kernelThreadID = Atomic<Int32>(0)
    /// The event thread was created (set once, by `startThread`).
    private let threadStarted = Atomic<Bool>(false)
    /// A `startThread` is in progress.
    private let threadStarting = Atomic<Bool>(false)
    /// True between a write to the eventfd and the pass of the loop that consumes it.
    private let wakeupPending = Atomic<Bool>(false)
    /// Per clock: the absolute instant its timerfd is armed for, or `UInt64.max` when it
    /// is disarmed. Written by the event thread, read by `scheduleTimer`.
    private let nextFireUptime = Atomic<UInt64>(UInt64.max)
    private let nextFireWall = Atomic<UInt64>(UInt64.max)
    private let nextFireBoot = Atomic<UInt64>(UInt64.max)
    /// The event thread's `pthread_self()`, 0 until it starts. Stored once by the event
    /// thread and read by timer requests, which skip the wakeup when they run there (the
    /// loop checks its inbox again before it waits). Relaxed suffices: a thread that reads
    /// 0 or another thread's id is not the event thread and wakes it, which is always safe.
    private let eventThread = Atomic<UInt>(0)
    /// Passes of the loop that fired at least one timer: the wakeups timers cost (tests
    /// count them to check coalescing). Relaxed: a statistic, written by the event thread.
    let timerFiringPasses = Atomic<Int>(0)

    // MARK: Event thread only

    private var heaps = [TimerHeap](repeating: TimerHeap(), count: DispatchClock.Kind.allCases.count)
    /// The timerfd of each clock, or -1 until a timer on that clock arrives.
    private var timerDescriptors = [Int32](repeating: -1, count: DispatchClock.Kind.allCases.count)
    /// Per clock, the timerfd made when the library was loaded and already in the epoll
    /// (`gc_event_take_reserved`), which `timerDescriptors` takes with the clock's first
    /// timer; a negative errno when there is none (then that timer creates one).
    private let reservedTimerDescriptors: [Int32]
    /// The empty signalfd made when the library was loaded and already in the epoll, which
    /// the first signal source takes (EventLoopSignals.swift); a negative errno if none.
    let reservedSignalDescriptor: Int32
    /// The instant each timerfd is armed for, 0 when disarmed.
    private var armedInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Each clock as read at the start of the current pass (0 before its first timer).
    private var passInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Registered descriptors (see EventLoopDescriptors.swift).
    var descriptors = DescriptorTable()
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

    // MARK: - Timers

    /// One-shot: calls `fire(context)` on the event thread once `deadline` (a
    /// `dispatch_time_t` on any clock) has passed, at the wakeup the timer policy chooses
    /// (at the deadline, or later but no later than `deadline + leeway` when that lets it
    /// share a wakeup with other timers; never early). DISPATCH_TIME_NOW and other past
    /// deadlines fire at once; FOREVER never fires. Returns a token for `cancelTimer`.
    /// Any thread.
    func scheduleTimer(deadline: UInt64, leeway: UInt64, fire: DispatchFunction,
                       context: UnsafeMutableRawPointer?) -> TimerToken {
        let node = TimerNode(fire: fire, context: context)
        armTimer(node, deadline: deadline, leeway: leeway)
        return TimerToken(node: node)
    }

    /// Cancels a one-shot timer. Returns true when the timer will never fire; false when
    /// it already fired or is firing right now (its callback owns the context), or was
    /// cancelled before. Any thread.
    func cancelTimer(_ token: TimerToken) -> Bool {
        cancelTimer(token.node, completion: nil, context: nil)
    }

    // MARK: - Reusable timers (the interface timer sources use)
    //
    // A timer source makes one `TimerNode(fire:context:)` and keeps it. Calls for one node
    // may come from any thread, but the owner serializes them (its own lock or queue):
    // the protocol coalesces requests, it does not order two racing owners. `fire` and a
    // cancel's completion run on the event thread, one at a time, and must only hand work
    // elsewhere (push onto a queue, bump a counter); they may call these functions.

    /// Arms `node` to fire once at `deadline` (a `dispatch_time_t`; FOREVER: armed, but it
    /// never fires), with `leeway`, replacing any earlier arm that has not fired. The node
    /// stays in the heap it was in (it is re-sorted, not reallocated). A suspended node
    /// keeps the new arm for its resume. Returns the arm's number, which a `fire` callback
    /// can compare with `node.appliedArm` (a fire of an older arm can be in flight while
    /// this returns). Ignored, returning 0, after `cancelTimer`.
    @discardableResult
    func armTimer(_ node: TimerNode, deadline: UInt64, leeway: UInt64) -> UInt64 {
        let instant = DispatchClock.decode(deadline, resolvingNow: false)
        let latest = instant.map { TimerNode.latest(deadline: $0.nanoseconds, leeway: leeway) } ?? 0
        node.requestLock.lock()
        if node.request.isCancelled {
            node.requestLock.unlock()
            return 0
        }
        node.request.arm &+= 1
        let arm = node.request.arm
        node.request.clock = instant?.kind
        node.request.deadline = instant?.nanoseconds ?? 0
        node.request.latest = latest
        node.request.isArmed = true
        let wake = node.request.wantsHeap
        let push = enqueueLocked(node)
        node.requestLock.unlock()
        if push { timerInbox.push(node) }
        // After the push (see the type's comment on `nextFire`). latest < limit <
        // UInt64.max, so a clock with no timers always gets a wakeup.
        if wake, let instant, latest < loadNextFire(instant.kind) { requestWakeupFromAnyThread() }
        return arm
    }

    /// Takes `node` out of the heap and keeps it out until it is armed again (a timer
    /// source set to FOREVER, or a one-shot source that has fired). Does not wake the loop.
    func disarmTimer(_ node: TimerNode) {
        updateRequest(node) { $0.isArmed = false }
    }

    /// Suspends `node`: it does not fire, and keeps its arm. Does not wake the loop. A
    /// deadline that passes while suspended fires at once on resume.
    func suspendTimer(_ node: TimerNode) {
        updateRequest(node) { $0.isSuspended = true }
    }

    /// Resumes a suspended `node`.
    func resumeTimer(_ node: TimerNode) {
        var wake: (DispatchClock.Kind, UInt64)? = nil
        updateRequest(node) { request in
            request.isSuspended = false
            if request.wantsHeap, let clock = request.clock { wake = (clock, request.latest) }
        }
        if let (clock, latest) = wake, latest < loadNextFire(clock) { requestWakeupFromAnyThread() }
    }

    /// Cancels `node`, finally. Returns true when this prevented a fire: `fire` will not be
    /// called again. Later arms are ignored. On the event thread, after the node has left
    /// the heap and after every `fire` call it will ever get, `completion(context)` runs
    /// (if given). Returns false and runs nothing when the node was already cancelled.
    @discardableResult
    func cancelTimer(_ node: TimerNode, completion: DispatchFunction?, context: UnsafeMutableRawPointer?) -> Bool {
        node.requestLock.lock()
        if node.request.isCancelled {
            node.requestLock.unlock()
            return false
        }
        // An arm at FOREVER counts as prevented too: "this timer will never fire" is what
        // the caller learns, and it owns the context from here.
        let prevented = node.request.isArmed && node.request.firedArm != node.request.arm
        node.request.isCancelled = true
        node.request.completion = completion
        node.request.completionContext = context
        let push = enqueueLocked(node)
        node.requestLock.unlock()
        if push { timerInbox.push(node) }
        // Promptly, so the completion (a cancel handler) does not wait for a timer.
        requestWakeupFromAnyThread()
        return prevented
    }

    /// Applies `change` to the request and queues the node. Does not wake the loop.
    private func updateRequest(_ node: TimerNode, _ change: (inout TimerRequest) -> Void) {
        node.requestLock.lock()
        if node.request.isCancelled {
            node.requestLock.unlock()
            return
        }
        change(&node.request)
        let push = enqueueLocked(node)
        node.requestLock.unlock()
        if push { timerInbox.push(node) }
    }

    /// Marks the node queued; returns whether the caller must push it (it was not queued).
    /// Under the node's request lock.
    @inline(__always)
    private func enqueueLocked(_ node: TimerNode) -> Bool {
        if node.request.isQueued { return false }
        node.request.isQueued = true
        return true
    }

    /// A wakeup, unless the caller is the event thread: it checks the inboxes again after
    /// the callbacks it runs, before it waits.
    @inline(__always)
    private func requestWakeupFromAnyThread() {
        if eventThread.load(ordering: .relaxed) == pthread_self() { return }
        requestWakeup()
    }

    private func loadNextFire(_ kind: DispatchClock.Kind) -> UInt64 {
        switch kind {
        case .uptime: return nextFireUptime.load(ordering: .sequentiallyConsistent)
        case .wall: return nextFireWall.load(ordering: .sequentiallyConsistent)
        case .boot: return nextFireBoot.load(ordering: .sequentiallyConsistent)
        }
    }

    private func storeNextFire(_ kind: DispatchClock.Kind, _ value: UInt64) {
        switch kind {
        case .uptime: nextFireUptime.store(value, ordering: .sequentiallyConsistent)
        case .wall: nextFireWall.store(value, ordering: .sequentiallyConsistent)
        case .boot: nextFireBoot.store(value, ordering: .sequentiallyConsistent)
        }
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
                if serviceTimers() { firedTimers = true }
                if timerInbox.isEmpty && descriptorInbox.isEmpty && rearmInbox.isEmpty && signalInbox.isEmpty {
                    break
                }
                readClocks()
                drainInboxes()
            }
            if firedTimers { timerFiringPasses.add(1, ordering: .relaxed) }
            timeout = serveWhileWorkersCannotStart(backoff: &backoff)
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
            if gc_timerfd_drain(descriptor) == -ECANCELED {
                // The wall clock was set; the kernel disarmed the timer. Re-arm it.
                armedInstants[kind.rawValue] = 0
                if debug { DebugLog.timer("wall clock was set: the kernel disarmed its timerfd, re-arming") }
            }
        }
    }

    private func drainInboxes() {
        timerInbox.drain { node in apply(node) }
        drainDescriptorInboxes()
        drainFileInbox()
        drainSignalInbox()
    }

    /// Makes the heap agree with `node`'s request: in the heap at the requested arm if the
    /// request wants it there, out otherwise; a cancel also runs its completion.
    private func apply(_ node: TimerNode) {
        node.requestLock.lock()
        let request = node.request
        node.request.isQueued = false
        if request.isCancelled {
            // The completion is the event thread's to run, once.
            node.request.completion = nil
            node.request.completionContext = nil
        }
        node.requestLock.unlock()
        if node.isRetired { return }
        if node.isInHeap && (!request.wantsHeap || node.appliedArm != request.arm) {
            heaps[node.clock.rawValue].remove(node)
        }
        if request.isCancelled {
            node.isRetired = true
            request.completion?(request.completionContext)
            return
        }
        if request.wantsHeap, !node.isInHeap, let clock = request.clock {
            node.clock = clock
            node.deadline = request.deadline
            node.latest = request.latest
            node.appliedArm = request.arm
            let k = clock.rawValue
            if timerDescriptors[k] < 0 {
                createTimerDescriptor(clock)
                heaps[k].insert(node)  // no reading of this clock yet
            } else {
                // Read before the inboxes were emptied, and what `serviceTimers` pops at.
                heaps[k].insert(node, now: passInstants[k])
            }
        }
    }

    /// Reads every clock that has timers into `passInstants`.
    private func readClocks() {
        for kind in DispatchClock.Kind.allCases where timerDescriptors[kind.rawValue] >= 0 {
            passInstants[kind.rawValue] = DispatchClock.read(kind)
        }
    }

    /// Fires every timer due at the pass's clock readings, then arms each clock's timerfd
    /// at its wakeup A (see `TimerHeap`). Returns whether a timer fired. (A clock whose
    /// first timer arrived in this pass has no reading yet: its timerfd is armed, and
    /// expires at once if the timer is due.)
    private func serviceTimers() -> Bool {
        var fired = false
        for kind in DispatchClock.Kind.allCases {
            let k = kind.rawValue
            if timerDescriptors[k] < 0 { continue }
            // Fire only at a wakeup: when the clock has reached the group's instant A. A pass
            // that comes earlier (the inbox, a descriptor, or the timerfd of an instant that
            // a newly arrived timer has since moved later) fires nothing: the due timers are
            // in the group, and A is within each one's window. A timer that arrived already
            // due makes `wakeupInstant()` that past deadline: it fires at once, with every
            // due timer before it in deadline order.
            if let wakeup = heaps[k].wakeupInstant(), wakeup <= passInstants[k] {
                while let node = heaps[k].popDue(now: passInstants[k]) {
                    // Fire only if the heap entry is the owner's latest word: with a
                    // request waiting, applying it decides (and fires in this pass if the
                    // request still wants it, since its deadline has passed).
                    node.requestLock.lock()
                    let commit = !node.request.isQueued
                    if commit { node.request.firedArm = node.request.arm }
                    node.requestLock.unlock()
                    if commit {
                        fired = true
                        node.fire(node.context)
                    }
                }
            }
            // 0 disarms a timerfd: a due timer at instant 0 (NOW) is armed at 1, also past.
            let target = heaps[k].wakeupInstant().map { max($0, 1) } ?? 0
            if target != armedInstants[k] {
                let rc = gc_timerfd_arm(timerDescriptors[k], target, kind == .wall)
                if rc != 0 { EventLoop.systemFailure("timerfd_settime", rc) }
                armedInstants[k] = target
                storeNextFire(kind, target == 0 ? UInt64.max : target)
                if debug { logTimerArm(kind, target) }
            }
        }
        return fired
    }

    /// The debug line for a re-arm at `target` (0: disarmed). Event thread only; cold.
    @inline(never)
    private func logTimerArm(_ kind: DispatchClock.Kind, _ target: UInt64) {
        let k = kind.rawValue
        let count = heaps[k].count
        let timers = DebugLog.count(count, "timer") + " on the clock"
        if target == 0 {
            DebugLog.timer("\(kind) timerfd disarmed (\(timers))")
            return
        }
        // A fresh reading: `passInstants` is 0 for a clock whose first timer came this pass.
        let now = DispatchClock.read(kind)
        let delay = target > now ? DebugLog.microseconds(target - now) : "0 µs (due now)"
        // L − A: how much later than A the group of timers firing at A may fire.
        // (Nothing to say for a group already due: it fires at once.)
        let leeway = target > now ? heaps[k].windowEnd().map { $0 > target ? $0 - target : 0 } ?? 0 : 0
        DebugLog.timer("\(kind) timerfd armed at +\(delay), leeway \(DebugLog.microseconds(leeway)) (\(timers))")
    }

    private func createTimerDescriptor(_ kind: DispatchClock.Kind) {
        if reservedTimerDescriptors[kind.rawValue] >= 0 {
            timerDescriptors[kind.rawValue] = reservedTimerDescriptors[kind.rawValue]
            return
        }
        let descriptor = EventLoop.check(gc_timerfd_create(Int32(kind.rawValue)), "timerfd_create")
        _ = EventLoop.check(gc_poll_control(poll, GC_POLL_ADD, descriptor, GC_POLL_IN,
                                            EventLoop.internalData(descriptor)), "epoll_ctl")
        timerDescriptors[kind.rawValue] = descriptor
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
