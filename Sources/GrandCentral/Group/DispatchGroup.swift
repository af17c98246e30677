import CGrandCentral
import Synchronization

/// A dispatch group: a count of unfinished work, waiters, and notifications to run when
/// the count returns to zero.
///
/// `state` packs the count with two flags so that an uncontended enter/leave pair is two
/// atomic adds and nothing else:
/// ```
/// bits 0-31  count of entered, not yet left work
/// bit 32     HAS_WAITERS: a thread sleeps (or is about to) in wait
/// bit 33     HAS_NOTIFY: `notifications` is not empty
/// ```
/// The leave that brings the count to zero with a flag set takes the slow path: it clears
/// the flags, bumps `generation` (the futex word waiters sleep on) and wakes them, and
/// submits the notifications. A waiter reads `generation` before it sets HAS_WAITERS, so a
/// zero-transition between the two changes the word and its sleep returns at once.
/// `notifications` is guarded by `notifyLock`.
///
/// Lifetime: as in libdispatch, a group holds a reference to itself while its count is
/// non-zero (taken by the enter that leaves zero, dropped by the leave that returns to
/// it), so work in flight keeps it alive without a retain per item.
public final class DispatchGroup: DispatchObject {
    let state = Atomic<UInt64>(0)
    let generation: UnsafeMutablePointer<UInt32>
    private var notifications: [(DispatchQueue, DispatchFunction, UnsafeMutableRawPointer?)] = []
    private let notifyLock = SpinLock()

    static let countMask: UInt64 = 0xFFFF_FFFF
    static let hasWaiters: UInt64 = 1 << 32
    static let hasNotify: UInt64 = 1 << 33

    public init() {
        generation = .allocate(capacity: 1)
        generation.initialize(to: 0)
        super.init(kind: .group)
    }

    deinit {
        generation.deallocate()
    }

    /// `dispatch_group_enter`.
    @inline(__always)
    public func enter() {
        let old = state.wrappingAdd(1, ordering: .relaxed).oldValue
        let count = old & Self.countMask
        if count == 0 {
            _ = Unmanaged.passUnretained(self).retain()
        } else if count == Self.countMask {
            clientBug("dispatch_group_enter", "too many nested enters")
        }
    }

    /// `dispatch_group_leave`.
    @inline(__always)
    public func leave() {
        // releasing: the work's writes happen-before whoever observes the group empty.
        let old = state.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue
        let count = old & Self.countMask
        if count == 1 {
            if old & (Self.hasWaiters | Self.hasNotify) != 0 { becameEmpty() }
            Unmanaged.passUnretained(self).release()
            return
        }
        if count == 0 { clientBug("dispatch_group_leave", "unbalanced call to dispatch_group_leave()") }
    }

    @inline(never)
    private func becameEmpty() {
        var pending: [(DispatchQueue, DispatchFunction, UnsafeMutableRawPointer?)] = []
        notifyLock.withLock {
            swap(&pending, &notifications)
            state.bitwiseAnd(~(Self.hasWaiters | Self.hasNotify), ordering: .acquiringAndReleasing)
        }
        _ = gc_word_add(generation, 1)
        gc_futex_wake(generation, Int32.max)
        for (queue, function, context) in pending {
            queue.enqueue(function, context)
            Unmanaged.passUnretained(queue).release()
        }
    }

    /// `dispatch_group_wait`: true when the group emptied, false on timeout.
    func wait(timeoutNanoseconds: Int64) -> Bool {
        if state.load(ordering: .acquiring) & Self.countMask == 0 { return true }
        if timeoutNanoseconds == 0 { return false }
        let start = gc_uptime_ns()
        BlockingRegion.enter()
        defer { BlockingRegion.leave() }
        while true {
            let seen = gc_word_load(generation)
            var s = state.load(ordering: .sequentiallyConsistent)
            while true {
                if s & Self.countMask == 0 { return true }
                if s & Self.hasWaiters != 0 { break }
                let (done, now) = state.weakCompareExchange(expected: s, desired: s | Self.hasWaiters,
                                                            ordering: .sequentiallyConsistent)
                if done { break }
                s = now
            }
            var remaining: Int64 = -1
            if timeoutNanoseconds > 0 {
                remaining = timeoutNanoseconds - Int64(gc_uptime_ns() &- start)
                if remaining <= 0 { return false }
            }
            _ = gc_futex_wait(generation, seen, remaining)
        }
    }

    /// `dispatch_group_notify_f`: submits `function(context)` to `queue` once the group is
    /// empty (at once if it is empty now).
    func notify(queue: DispatchQueue, function: DispatchFunction, context: UnsafeMutableRawPointer?) {
        let submitNow: Bool = notifyLock.withLock {
            var s = state.load(ordering: .acquiring)
            while true {
                if s & Self.countMask == 0 { return true }
                let (done, now) = state.weakCompareExchange(expected: s, desired: s | Self.hasNotify,
                                                            ordering: .acquiringAndReleasing)
                if done { break }
                s = now
            }
            _ = Unmanaged.passUnretained(queue).retain()
            notifications.append((queue, function, context))
            return false
        }
        if submitNow { queue.enqueue(function, context) }
    }

    /// `dispatch_group_async_f`.
    @inline(__always)
    func async(queue: DispatchQueue, function: DispatchFunction, context: UnsafeMutableRawPointer?) {
        enter()
        let node = ContinuationCache.make(function, context, .groupMember)
        node.pointee.group = Unmanaged.passUnretained(self).toOpaque()
        queue.push(node)
    }

    override func debugDescription() -> String {
        let s = state.load(ordering: .relaxed)
        return "group: refcount = \(externalRefs.load(ordering: .relaxed)), count = \(s & Self.countMask), "
            + "waiters = \(s & Self.hasWaiters != 0), notifications = \(s & Self.hasNotify != 0)"
    }
}
