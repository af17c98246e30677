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
///   CLOCK_BOOTTIME), each created on first use and armed at an absolute instant: the
///   smallest `deadline + leeway` of that clock's timers (see `TimerHeap`). The wall
///   timerfd also asks for TFD_TIMER_CANCEL_ON_SET, so setting the system clock wakes the
///   loop to re-evaluate;
/// - the descriptors of registered sources (see EventLoopDescriptors.swift).
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
/// 2. A new timer that is not earlier than what its clock's timerfd is already armed for
///    (`nextFire`) does not wake the loop at all: the loop will empty the inbox when the
///    timerfd expires, in time for the new timer. The race this invites (the loop is
///    between emptying the inbox and re-arming, with a later instant, when the producer
///    reads the old one) is closed by the loop checking the inboxes again after it
///    publishes `nextFire`: "producer: push, then load nextFire" against "event thread:
///    store nextFire, then load the inbox", sequentially consistent, means at least one
///    side sees the other's write.
///
/// Handlers never run here. The callbacks this thread calls are the engine's (a queue's
/// "timer fired" or "descriptor ready" function), and they only push work onto a queue.
final class EventLoop: @unchecked Sendable {
    /// The process's event loop; creating it starts the event thread.
    static let shared = EventLoop()

    // MARK: Immutable after init

    let poll: Int32
    private let wakeupDescriptor: Int32

    // MARK: Shared between threads (atomics only)

    /// Timers to insert into a heap.
    private let timerInbox = EventLoopInbox<TimerScheduleLink>()
    /// Timers cancelled before they fired, to remove from their heap.
    private let cancelInbox = EventLoopInbox<TimerCancelLink>()
    /// Descriptor registrations and unregistrations, in submission order.
    let descriptorInbox = EventLoopInbox<DescriptorCommandLink>()
    /// Registrations whose owner asked to be told about readiness again.
    let rearmInbox = EventLoopInbox<DescriptorRearmLink>()
    /// True between a write to the eventfd and the pass of the loop that consumes it.
    private let wakeupPending = Atomic<Bool>(false)
    /// Per clock: the absolute instant its timerfd is armed for, or `UInt64.max` when it
    /// is disarmed. Written by the event thread, read by `scheduleTimer`.
    private let nextFireUptime = Atomic<UInt64>(UInt64.max)
    private let nextFireWall = Atomic<UInt64>(UInt64.max)
    private let nextFireBoot = Atomic<UInt64>(UInt64.max)

    // MARK: Event thread only

    private var heaps = [TimerHeap](repeating: TimerHeap(), count: DispatchClock.Kind.allCases.count)
    /// The timerfd of each clock, or -1 until a timer on that clock arrives.
    private var timerDescriptors = [Int32](repeating: -1, count: DispatchClock.Kind.allCases.count)
    /// The instant each timerfd is armed for, 0 when disarmed.
    private var armedInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Each clock as read at the start of the current pass (0 before its first timer).
    private var passInstants = [UInt64](repeating: 0, count: DispatchClock.Kind.allCases.count)
    /// Registered descriptors (see EventLoopDescriptors.swift).
    var descriptors = DescriptorTable()

    /// Creates the epoll instance and the wakeup eventfd and starts the event thread.
    /// Internal so that tests can run a loop of their own; the library uses `shared`.
    /// A loop's thread runs for the rest of the process.
    init() {
        poll = EventLoop.check(gc_poll_create(), "epoll_create1")
        wakeupDescriptor = EventLoop.check(gc_eventfd_create(), "eventfd")
        _ = EventLoop.check(gc_poll_control(poll, GC_POLL_ADD, wakeupDescriptor, GC_POLL_IN,
                                            EventLoop.internalData(wakeupDescriptor)), "epoll_ctl")
        let started = gc_thread_create({ raw in
            Unmanaged<EventLoop>.fromOpaque(raw!).takeUnretainedValue().run()
        }, Unmanaged.passRetained(self).toOpaque(), "gc-event")
        if started != 0 { EventLoop.systemFailure("pthread_create", -started) }
    }

    // MARK: - Timers

    /// Calls `fire(context)` on the event thread once `deadline` (a `dispatch_time_t` on
    /// any clock) has passed, and no later than `deadline + leeway` when the machine
    /// allows. DISPATCH_TIME_NOW and other past deadlines fire at once; FOREVER never
    /// fires. Returns a token for `cancelTimer`. Any thread.
    func scheduleTimer(deadline: UInt64, leeway: UInt64, fire: DispatchFunction,
                       context: UnsafeMutableRawPointer?) -> TimerToken {
        guard let instant = DispatchClock.decode(deadline, resolvingNow: false) else {
            let never = TimerNode(clock: .uptime, deadline: UInt64.max, leeway: 0, isScheduled: false,
                                  fire: fire, context: context)
            return TimerToken(node: never)
        }
        let node = TimerNode(clock: instant.kind, deadline: instant.nanoseconds, leeway: leeway,
                             isScheduled: true, fire: fire, context: context)
        timerInbox.push(node)
        // node.latest < limit < UInt64.max, so a disarmed clock always gets a wakeup.
        if node.latest < loadNextFire(instant.kind) {
            requestWakeup()
        }
        return TimerToken(node: node)
    }

    /// Cancels a timer that has not fired. Returns true when the timer will never fire;
    /// false when it already fired or is firing right now (its callback owns the context).
    /// Any thread, at most once per token is useful (later calls return false).
    func cancelTimer(_ token: TimerToken) -> Bool {
        let node = token.node
        let (won, _) = node.state.compareExchange(
            expected: TimerState.pending, desired: TimerState.cancelled, ordering: .acquiringAndReleasing)
        guard won else { return false }
        if node.isScheduled {
            // Removed from the heap promptly, so that re-arming a far-future timer over
            // and over does not pile up dead nodes.
            cancelInbox.push(node)
            requestWakeup()
        }
        return true
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
    }

    // MARK: - The loop (event thread only from here on)

    private func run() -> Never {
        let capacity: Int32 = 64
        let events = UnsafeMutablePointer<gc_poll_event_t>.allocate(capacity: Int(capacity))
        while true {
            let count = gc_poll_wait(poll, events, capacity, -1)
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
            while true {
                deliverSyntheticReadiness()
                serviceTimers()
                if timerInbox.isEmpty && cancelInbox.isEmpty && descriptorInbox.isEmpty && rearmInbox.isEmpty {
                    break
                }
                readClocks()
                drainInboxes()
            }
        }
    }

    /// An event on the eventfd or a timerfd.
    private func handleInternal(_ descriptor: Int32) {
        if descriptor == wakeupDescriptor {
            _ = gc_eventfd_drain(wakeupDescriptor)
            // Before the inboxes are emptied (see the type's comment).
            wakeupPending.store(false, ordering: .sequentiallyConsistent)
            return
        }
        for kind in DispatchClock.Kind.allCases where timerDescriptors[kind.rawValue] == descriptor {
            if gc_timerfd_drain(descriptor) == -ECANCELED {
                // The wall clock was set; the kernel disarmed the timer. Re-arm it.
                armedInstants[kind.rawValue] = 0
            }
        }
    }

    private func drainInboxes() {
        timerInbox.drain { node in
            // A timer cancelled before it got here is dropped; its cancel entry finds it
            // in no heap.
            guard node.state.load(ordering: .relaxed) == TimerState.pending else { return }
            if timerDescriptors[node.clock.rawValue] < 0 { createTimerDescriptor(node.clock) }
            heaps[node.clock.rawValue].insert(node)
        }
        cancelInbox.drain { node in
            heaps[node.clock.rawValue].remove(node)
        }
        drainDescriptorInboxes()
    }

    /// Reads every clock that has timers into `passInstants`.
    private func readClocks() {
        for kind in DispatchClock.Kind.allCases where timerDescriptors[kind.rawValue] >= 0 {
            passInstants[kind.rawValue] = DispatchClock.read(kind)
        }
    }

    /// Fires every timer due at the pass's clock readings, then arms each clock's timerfd
    /// for its next latest instant. (A clock whose first timer arrived in this pass has
    /// no reading yet: its timerfd is armed, and expires at once if the timer is due.)
    private func serviceTimers() {
        for kind in DispatchClock.Kind.allCases {
            let k = kind.rawValue
            if timerDescriptors[k] < 0 { continue }
            if !heaps[k].isEmpty {
                while let node = heaps[k].popDue(now: passInstants[k]) {
                    let (won, _) = node.state.compareExchange(
                        expected: TimerState.pending, desired: TimerState.fired, ordering: .acquiringAndReleasing)
                    if won { node.fire(node.context) }
                }
            }
            let target = heaps[k].earliestLatest ?? 0
            if target != armedInstants[k] {
                let rc = gc_timerfd_arm(timerDescriptors[k], target, kind == .wall)
                if rc != 0 { EventLoop.systemFailure("timerfd_settime", rc) }
                armedInstants[k] = target
                storeNextFire(kind, target == 0 ? UInt64.max : target)
            }
        }
    }

    private func createTimerDescriptor(_ kind: DispatchClock.Kind) {
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

/// A scheduled timer, for `EventLoop.cancelTimer`.
struct TimerToken: Sendable {
    let node: TimerNode
}

enum TimerScheduleLink: EventLoopInboxLink {
    static func next(of node: TimerNode) -> UnsafeMutableRawPointer? { node.scheduleLink }
    static func setNext(of node: TimerNode, to next: UnsafeMutableRawPointer?) { node.scheduleLink = next }
}

enum TimerCancelLink: EventLoopInboxLink {
    static func next(of node: TimerNode) -> UnsafeMutableRawPointer? { node.cancelLink }
    static func setNext(of node: TimerNode, to next: UnsafeMutableRawPointer?) { node.cancelLink = next }
}
