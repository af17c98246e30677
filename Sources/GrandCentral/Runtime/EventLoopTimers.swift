import CGrandCentral
import Glibc

/// Timers on the event loop: the interface other threads call (one-shot timers for
/// `dispatch_after`, reusable `TimerNode`s for timer sources) and the event thread's side
/// (applying requests to the heaps, firing due timers, arming each clock's timerfd).
///
/// Protocol. A caller never touches a heap: it changes the node's `request` under the
/// node's lock and, if the node is not already queued, pushes it onto `timerInbox`; the
/// event thread applies the request (`applyTimerRequest`) when it empties the inbox. So
/// many changes to one node between two passes cost one push and one heap operation.
/// Whether the caller also wakes the loop, and why the race with a re-arming event thread
/// is closed, is in `EventLoop`'s comment ("Wakeups are coalesced twice"). The heaps, the
/// timerfds and their armed instants are the event thread's alone (see `EventLoop`); the
/// policy that chooses each clock's wakeup is `TimerHeap`'s.
extension EventLoop {
    // MARK: - One-shot timers (dispatch_after)

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

    /// `dispatch_after`'s timer: like `scheduleTimer`, but it cannot be cancelled, so its
    /// node comes from `oneShotPool` and goes back there once it has fired (no allocation
    /// per call in steady state). Any thread.
    func scheduleOneShot(deadline: UInt64, leeway: UInt64, fire: DispatchFunction,
                         context: UnsafeMutableRawPointer?) {
        let node: TimerNode
        if let pooled = oneShotPool.take() {
            pooled.fire = fire
            pooled.context = context
            node = pooled
        } else {
            node = TimerNode(fire: fire, context: context, returnsToPool: true)
        }
        armTimer(node, deadline: deadline, leeway: leeway)
    }

    /// Cancels a one-shot timer. Returns true when the timer will never fire; false when
    /// it already fired or is firing right now (its callback owns the context), or was
    /// cancelled before. Any thread.
    func cancelTimer(_ token: TimerToken) -> Bool {
        cancelTimer(token.node, completion: nil)
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
        node.request.armFired = false
        let wake = node.request.wantsHeap
        let push = enqueueLocked(node)
        node.requestLock.unlock()
        if push { timerInbox.push(node) }
        // After the push (see `EventLoop`'s comment on `nextFire`). latest < limit <
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
    /// the heap and after every `fire` call it will ever get, `completion(node.context)`
    /// runs (if given). Returns false and runs nothing when the node was already cancelled.
    @discardableResult
    func cancelTimer(_ node: TimerNode, completion: DispatchFunction?) -> Bool {
        node.requestLock.lock()
        if node.request.isCancelled {
            node.requestLock.unlock()
            return false
        }
        // An arm at FOREVER counts as prevented too: "this timer will never fire" is what
        // the caller learns, and it owns the context from here.
        let prevented = node.request.isArmed && !node.request.armFired
        node.request.isCancelled = true
        node.request.completion = completion
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

    func loadNextFire(_ kind: DispatchClock.Kind) -> UInt64 {
        switch kind {
        case .uptime: return nextFireUptime.load(ordering: .sequentiallyConsistent)
        case .wall: return nextFireWall.load(ordering: .sequentiallyConsistent)
        case .boot: return nextFireBoot.load(ordering: .sequentiallyConsistent)
        }
    }

    func storeNextFire(_ kind: DispatchClock.Kind, _ value: UInt64) {
        switch kind {
        case .uptime: nextFireUptime.store(value, ordering: .sequentiallyConsistent)
        case .wall: nextFireWall.store(value, ordering: .sequentiallyConsistent)
        case .boot: nextFireBoot.store(value, ordering: .sequentiallyConsistent)
        }
    }

    // MARK: - Event thread

    /// Makes the heap agree with `node`'s request: in the heap at the requested arm if the
    /// request wants it there, out otherwise; a cancel also runs its completion.
    func applyTimerRequest(_ node: TimerNode) {
        node.requestLock.lock()
        let request = node.request
        node.request.isQueued = false
        if request.isCancelled {
            // The completion is the event thread's to run, once.
            node.request.completion = nil
        }
        node.requestLock.unlock()
        if node.isRetired { return }
        if node.isInHeap && (!request.wantsHeap || node.appliedArm != request.arm) {
            heaps[node.clock.rawValue].remove(node)
        }
        if request.isCancelled {
            node.isRetired = true
            request.completion?(node.context)
            return
        }
        if request.wantsHeap, !node.isInHeap, let clock = request.clock {
            node.clock = clock
            node.appliedArm = request.arm
            let k = clock.rawValue
            if timerDescriptors[k] < 0 {
                createTimerDescriptor(clock)
                // No reading of this clock yet.
                heaps[k].insert(node, deadline: request.deadline, latest: request.latest)
            } else {
                // Read before the inboxes were emptied, and what `fireDueTimers` pops at.
                heaps[k].insert(node, deadline: request.deadline, latest: request.latest, now: passInstants[k])
            }
        }
    }

    /// Reads every clock that has timers into `passInstants`.
    func readClocks() {
        for kind in DispatchClock.Kind.allCases where timerDescriptors[kind.rawValue] >= 0 {
            passInstants[kind.rawValue] = DispatchClock.read(kind)
        }
    }

    /// Fires every timer due at the pass's clock readings. Returns whether a timer fired.
    /// (A clock whose first timer arrived in this pass has no reading yet: `armTimerDescriptors`
    /// arms its timerfd, which expires at once if the timer is due.)
    func fireDueTimers() -> Bool {
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
                    if commit { node.request.armFired = true }
                    node.requestLock.unlock()
                    if commit {
                        fired = true
                        node.fire(node.context)
                        // Its one arm is spent and nothing else can arm it again.
                        if node.returnsToPool { oneShotPool.give(node) }
                    }
                }
            }
        }
        return fired
    }

    /// Arms each clock's timerfd at its wakeup A (see `TimerHeap`) and publishes it
    /// (`nextFire`). The loop calls this once its inboxes are empty, so a pass that fires a
    /// repeating timer arms once, for the next fire (arming as each fire left the heap
    /// disarmed the timerfd, then armed it again once the timer's next arm was applied: two
    /// timerfd_settime calls per fire). An expiry the loop did not read
    /// (`unreadExpirations`) is cleared by the new arm (timerfd_settime resets it); one
    /// that no new arm clears is read here, so the descriptor is not left readable.
    func armTimerDescriptors() {
        for kind in DispatchClock.Kind.allCases {
            let k = kind.rawValue
            if timerDescriptors[k] < 0 { continue }
            // 0 disarms a timerfd: a due timer at instant 0 (NOW) is armed at 1, also past.
            var target = heaps[k].wakeupInstant().map { max($0, 1) } ?? 0
            approachInstants[k] = 0
            if target > 1 && kind != .wall, let early = approachArm(kind, wakeup: target) {
                approachInstants[k] = target
                target = early
            }
            if target != armedInstants[k] {
                let rc = gc_timerfd_arm(timerDescriptors[k], target, kind == .wall)
                if rc != 0 { EventLoop.systemFailure("timerfd_settime", rc) }
                armedInstants[k] = target
                storeNextFire(kind, target == 0 ? UInt64.max : target)
                if debug { logTimerArm(kind, target) }
            } else if unreadExpirations & (1 << k) != 0 {
                _ = gc_timerfd_drain(timerDescriptors[k])
            }
        }
        unreadExpirations = 0
    }

    /// The instant to arm clock `kind`'s timerfd at instead of its wakeup A, when the loop
    /// should approach A by polling (see `TimerApproach`): the group's window end L less
    /// `TimerApproach.lead`, when that is before A. Nil to arm at A.
    private func approachArm(_ kind: DispatchClock.Kind, wakeup: UInt64) -> UInt64? {
        guard let end = heaps[kind.rawValue].windowEnd(), end &- wakeup < TimerApproach.lead,
              end > TimerApproach.lead else { return nil }
        let early = end - TimerApproach.lead
        guard early < wakeup, gc_uptime_ns() >= descriptorPolling.offUntil, poolLeavesACPUFree() else { return nil }
        return early
    }

    /// 0 while a clock's timerfd, armed early (`approachArm`), has expired and no pass has
    /// fired its wakeup yet: the loop polls up to it. Else `timeout`. Closing an approach
    /// compares the CPU time the thread got with the wall time it polled (as
    /// `DescriptorPolling` does, also every `DescriptorPolling.recheck` while one approach
    /// stays open): a thread kept waiting for a CPU turns both kinds of polling off for
    /// `DescriptorPolling.backoff`. Event thread only.
    func timerApproachTimeout(_ timeout: Int32) -> Int32 {
        for kind in DispatchClock.Kind.allCases where approachInstants[kind.rawValue] != 0 {
            if DispatchClock.read(kind) >= armedInstants[kind.rawValue] {
                let now = gc_uptime_ns()
                if timerApproach.startedAt == 0 {
                    timerApproach.startedAt = now
                    timerApproach.cpuAtStart = gc_thread_cpu_ns()
                } else if now &- timerApproach.startedAt >= DescriptorPolling.recheck {
                    // A run of precise timers can keep one approach open: check every
                    // `recheck` too. Found contended, the next pass (this poll still
                    // happens: the timerfd's early expiry is spent) arms at the wakeup.
                    endApproach(now: now)
                }
                return 0
            }
        }
        if timerApproach.startedAt != 0 { endApproach(now: gc_uptime_ns()) }
        return timeout
    }

    /// Compares the CPU time the thread got since the approach (or the last check) began
    /// with the wall time: more than a quarter spent waiting for a CPU turns polling off
    /// for `DescriptorPolling.backoff`.
    private func endApproach(now: UInt64) {
        let polled = now &- timerApproach.startedAt
        let ran = gc_thread_cpu_ns() &- timerApproach.cpuAtStart
        if ran < polled && (polled - ran) * 4 > polled {
            descriptorPolling.offUntil = now &+ DescriptorPolling.backoff
        }
        timerApproach.startedAt = 0
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
    }}

/// Approaching a precise timer's wakeup by polling: for a timer whose window is narrower
/// than `lead` (zero leeway, or a few µs: a program that asked for precision), the loop arms
/// its timerfd `lead` before the window ends and polls (`epoll_wait` with a zero timeout,
/// each poll a pass of the loop) until a pass fires it. It never fires early: a pass fires
/// only timers whose wakeup the clock has reached (`fireDueTimers`).
///
/// Why. A timerfd expiry reaches a thread sleeping in `epoll_wait` 27-40 µs late at p50 on
/// these machines (a virtual CPU woken from idle; measured with one thread, one timerfd and
/// nothing else), which was most of the 1 ms zero-leeway timer's lateness in both libraries
/// (bench timer_p50: 27-33 µs). Armed 50 µs early, the same one-thread loop is 0 µs late at
/// p50 and 8-24 µs at p99; the handler's lateness (bench timer_p50) fell from 29 to 8.5-13
/// µs, what is left being the wake of the worker that runs it.
///
/// When. Only where polling costs no runnable thread its CPU, by `DescriptorPolling`'s rules:
/// two CPUs or more, fewer pool workers running than CPUs, and polling not backed off
/// after the thread was found waiting for a CPU (measured as each approach ends, and every
/// `DescriptorPolling.recheck` while a run of precise timers keeps one open). Not for
/// the wall clock (its expiry is read at once for ECANCELED, and `dispatch_walltime` timers
/// are calendar timers). Cost: at most `lead` of an otherwise idle CPU per wakeup of a
/// precise timer, less the wake latency it hides: 25-30 µs per fire of a 1 ms timer, 2.5-3%
/// of a CPU. Timers with wider windows (every `dispatch_after`: 10% leeway) never poll.
///
/// Measured and left out: a longer lead (80 and 120 µs moved neither p50 nor p99 of the 1 ms
/// timer, 3 alternating runs each: the tail is not the timerfd's wake latency), and waking
/// a parked worker as an approach begins so that one spins when the timer fires (p50 8.6-10.5
/// -> 27-31 µs: the woken worker spun out first, and the fire woke another, so the handler
/// changed threads on 1,550-1,900 of 4,000 fires against 0-5).
struct TimerApproach {
    /// How long before a precise timer's window ends its timerfd is armed (ns).
    static let lead: UInt64 = 50_000

    /// When the current approach began polling (uptime, ns; 0 when not approaching), and
    /// the thread's CPU time then.
    var startedAt: UInt64 = 0
    var cpuAtStart: UInt64 = 0
}
