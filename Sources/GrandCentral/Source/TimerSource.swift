import CGrandCentral
import Glibc

/// Timer sources: one reusable `TimerNode` in the event loop's heap for the source's whole
/// life. `dispatch_source_set_timer` re-arms it, suspending and resuming the source suspend
/// and resume it, cancelling cancels it (the cancel completes on the event thread, after
/// the last fire, and only then may the cancel handler run). The timer policy is the event
/// loop's (TimerHeap.swift): never early, a lone timer at its deadline, leeway only to let
/// timers share a wakeup.
///
/// Repeating timers do not drift: fire k is due at start + k·interval. When a fire is
/// late by more than an interval (a busy machine, a suspended source, a sleeping laptop),
/// the fires it missed are counted into the source's data — which is what
/// `dispatch_source_get_data` reports for a timer: the fires since the handler last ran —
/// and the next deadline is the first multiple of the interval after now, so lateness
/// never accumulates and a suspended timer costs no wakeups.
///
/// Parameters, as libdispatch takes them: start NOW is the current uptime, FOREVER never
/// fires (the node stays out of the heap), a `dispatch_walltime` start runs on the wall
/// clock (and follows it when it is set), any other on its own clock. An interval of
/// FOREVER, or one so large that the second fire would be past the end of the clock, makes
/// a one-shot timer; an interval of 0 is taken as 1 ns. A repeating timer's leeway is
/// capped at half its interval (libdispatch's cap: a timer may not slip a whole period);
/// every value saturates at the end of the clock instead of wrapping.
///
/// The monitor is the timer's node itself (a `TimerNode` subclass): one object per timer
/// source for the heap entry and the schedule. Its `context` is the core's address; the
/// started node holds one reference to the core, taken by `start` and dropped by the
/// cancel's completion.
///
/// Fields: `config`, and comparisons of it with `appliedArm`, only under `configLock` (the
/// setter, the event thread's fire).
final class SourceTimer: TimerNode, SourceMonitor, @unchecked Sendable {
    /// The schedule. Words first, then bytes (a timer source is one `SourceTimer`; see
    /// TimerNode on layout).
    struct Config {
        /// The next fire's deadline, in nanoseconds on `clock`.
        var deadline: UInt64 = 0
        /// Nanoseconds between fires; 0 for a one-shot timer.
        var interval: UInt64 = 0
        var leeway: UInt64 = 0
        /// The event loop's number of the latest arm (0: not armed): a fire of any other
        /// arm is stale (the timer was set again meanwhile) and is dropped.
        var arm: UInt64 = 0
        /// The clock of the next deadline, or nil when the timer never fires (FOREVER, or
        /// never set).
        var clock: DispatchClock.Kind? = nil
        /// Whether the source's monitor is started (the node may be in the heap).
        var isStarted = false
        var isStopped = false
    }

    private let configLock = TimerRequestLock()
    private var config = Config()

    init(source: SourceCore) {
        super.init(fire: timerFired, context: Unmanaged.passUnretained(source).toOpaque())
    }

    /// `dispatch_source_set_timer`. Any thread.
    func setTimer(start: UInt64, interval: UInt64, leeway: UInt64) {
        var next = Config()
        if let instant = DispatchClock.decode(start, resolvingNow: true) {
            next.clock = instant.kind
            next.deadline = instant.nanoseconds
        }
        if interval < DispatchClock.limit {
            next.interval = max(interval, 1)
        }
        next.leeway = min(leeway, DispatchClock.limit)
        if next.interval != 0 { next.leeway = min(next.leeway, next.interval / 2) }
        configLock.lock()
        next.isStarted = config.isStarted
        next.isStopped = config.isStopped
        next.arm = config.arm
        config = next
        // libdispatch: "any pending source data accumulated for the previous timer values
        // has been cleared". Fires merge under this lock (`fired`), so none of the old
        // schedule's can land after this.
        let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
        source.discardPendingData()
        if config.isStarted && !config.isStopped { armLocked() }
        configLock.unlock()
    }

    /// Arms the node for `config`'s next deadline (or disarms it). Under `configLock`.
    private func armLocked() {
        guard let clock = config.clock else {
            EventLoop.shared.disarmTimer(self)
            config.arm = 0
            return
        }
        config.arm = EventLoop.shared.armTimer(self, deadline: DispatchClock.encode(clock, config.deadline),
                                               leeway: config.leeway)
    }

    func start(_ source: SourceCore) {
        // The node's reference to the core, released by the cancel's completion.
        _ = Unmanaged.passUnretained(source).retain()
        configLock.lock()
        config.isStarted = true
        armLocked()
        configLock.unlock()
    }

    func stop(_ source: SourceCore) {
        configLock.lock()
        config.isStopped = true
        configLock.unlock()
        EventLoop.shared.cancelTimer(self, completion: timerCancelled)
    }

    func suspend(_ source: SourceCore) { EventLoop.shared.suspendTimer(self) }

    /// Counts the fires that came due while the source was suspended into its data before
    /// the node goes back to the event loop, so the source's wakeup that follows the resume
    /// (SourceCore.resumeObject) finds them: the first handler call after the resume
    /// reports every fire missed, together with any merged before the suspension took
    /// effect, as libdispatch's does. Left to the event thread, the catch-up fire raced
    /// with that wakeup, and a drain taking only the data already pending (say the one
    /// fire of a timer started at NOW between activation and its suspension) split the
    /// missed fires over two handler calls.
    func resume(_ source: SourceCore) {
        configLock.lock()
        let count = catchUpLocked()
        if count != 0 { source.mergeAdd(count) }
        configLock.unlock()
        EventLoop.shared.resumeTimer(self)
    }

    /// The resume's catch-up: the current arm's fires due by now, counted as the event
    /// thread's fire counts them (`firedLocked`), and the node re-armed for the next one
    /// (a new arm, so a fire of the old one already on its way is stale and counts
    /// nothing). 0 when the deadline has not passed. Under `configLock`.
    private func catchUpLocked() -> UInt {
        guard config.isStarted, !config.isStopped, config.arm != 0, let clock = config.clock else { return 0 }
        guard DispatchClock.read(clock) >= config.deadline else { return 0 }
        guard config.interval != 0 else {
            config.arm = 0  // spent: stays out of the heap until set again
            EventLoop.shared.disarmTimer(self)
            return 1
        }
        let count = countRepeatingLocked(clock)
        // Ended (past the end of the clock): the node still holds the arm it was suspended
        // with, which must not go back into the heap.
        if config.arm == 0 { EventLoop.shared.disarmTimer(self) }
        return count
    }

    /// Event thread: the node's arm came due. Merges the fires into `source` (none for a
    /// stale fire), re-arming a repeating timer for its next multiple of the interval.
    /// The merge happens under the lock, so `setTimer` can discard every merged fire of
    /// the schedule it replaces.
    fileprivate func fired(_ source: SourceCore) {
        configLock.lock()
        defer { configLock.unlock() }
        let count = firedLocked()
        if count != 0 { source.mergeAdd(count) }
    }

    private func firedLocked() -> UInt {
        guard config.arm != 0, appliedArm == config.arm, let clock = config.clock else { return 0 }
        let interval = config.interval
        guard interval != 0 else {
            config.arm = 0  // spent: stays out of the heap until set again
            return 1
        }
        return countRepeatingLocked(clock)
    }

    /// A repeating timer whose deadline has come: the fires due by now (the one due and
    /// those missed), the deadline moved to the first multiple of the interval after now
    /// and armed (or the timer ended, when that is past the end of the clock). Under
    /// `configLock`.
    private func countRepeatingLocked(_ clock: DispatchClock.Kind) -> UInt {
        let interval = config.interval
        let now = DispatchClock.read(clock)
        let late = now > config.deadline ? now - config.deadline : 0
        let missed = late / interval
        let count = missed + 1
        let (step, overflow) = count.multipliedReportingOverflow(by: interval)
        let (next, overflow2) = config.deadline.addingReportingOverflow(step)
        if overflow || overflow2 || next >= DispatchClock.limit {
            config.clock = nil  // the next fire would be past the end of the clock
            config.arm = 0
        } else {
            config.deadline = next
            armLocked()
        }
        return UInt(truncatingIfNeeded: min(count, UInt64(UInt.max)))
    }
}

/// Event thread: a timer source's node fired; `context` is the core (the node's reference).
private let timerFired: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
    unsafeDowncast(source.monitor, to: SourceTimer.self).fired(source)
}

/// Event thread: the cancel completed; no fire follows. Drops the node's reference.
private let timerCancelled: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.monitorDidStop()
}
