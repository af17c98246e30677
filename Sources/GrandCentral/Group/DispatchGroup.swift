import CGrandCentral
import Synchronization

/// A dispatch group: a count of unfinished work, waiters, and notifications to run when
/// the count returns to zero.
///
/// `state` packs the count with two flags and a generation:
/// ```
/// bits 0-31   count of entered, not yet left work
/// bit 32      HAS_WAITERS: a thread sleeps (or is about to) in wait
/// bit 33      HAS_NOTIFY: `notifications` is not empty
/// bits 34-63  generation: how many times the count has returned to zero with a flag set
/// ```
/// An uncontended enter/leave pair is one atomic add and one CAS. The leave that brings
/// the count to zero with a flag set clears the flags and bumps the generation *in the same
/// CAS*, then wakes the waiters (through `wakeups`, the futex word they sleep on) and
/// submits the notifications registered under the generation it closed. A notification
/// registered after that — the group re-entered meanwhile — carries the new generation and
/// waits for the next return to zero. (The generation is 30 bits and compared with `<=`:
/// a notification would need to wait through 2^30 rounds for that to wrap.) A waiter reads `wakeups` before it sets HAS_WAITERS,
/// so a zero-transition between the two changes the word and its sleep returns at once.
/// `notifications` is guarded by `notifyLock`.
///
/// Lifetime: as in libdispatch, a group holds a reference to itself while its count is
/// non-zero (taken by the enter that leaves zero, dropped by the leave that returns to
/// it), so work in flight keeps it alive without a retain per item. Which reference
/// depends on who owns the group (`selfHoldIsExternal`): a group made for the C API is
/// owned through `externalRefs` (its handle's ARC retain is dropped when that count
/// reaches zero), so it holds itself with one atomic add on that count, as libdispatch's
/// `_dispatch_retain` is; a group made in Swift is owned by ARC and holds itself with an ARC
/// retain. (The ARC pair cost an uncontended C enter + leave 120 instructions against
/// libdispatch's 71, callgrind; the count costs it 2 atomic adds.)
public final class DispatchGroup: DispatchObject, @unchecked Sendable {
    let state = Atomic<UInt64>(0)
    let wakeups: UnsafeMutablePointer<UInt32>
    /// True when the group is owned through `externalRefs` (see Lifetime). Set once, by
    /// `makeForCAPI` before the group is published; read-only after.
    private var selfHoldIsExternal = false
    private struct Notification {
        let generation: UInt64
        let queue: DispatchQueue
        let function: DispatchFunction
        let context: UnsafeMutableRawPointer?
        let flags: ContinuationFlags
    }
    private var notifications: [Notification] = []
    private let notifyLock = SpinLock()

    static let countMask: UInt64 = 0xFFFF_FFFF
    static let hasWaiters: UInt64 = 1 << 32
    static let hasNotify: UInt64 = 1 << 33
    static let generationUnit: UInt64 = 1 << 34

    /// A new, empty group. (A designated initializer, as `Dispatch`'s is: the Swift API's
    /// surface is checked against it, scripts/api-diff.sh.)
    public init() {
        wakeups = .allocate(capacity: 1)
        wakeups.initialize(to: 0)
        super.init(kind: .group)
    }

    /// A new, empty group owned through the C API's count (`externalRefs`, see
    /// DispatchObject), whose reaching zero drops the ARC retain the owner holds.
    static func makeForCAPI() -> DispatchGroup {
        let group = DispatchGroup()
        group.selfHoldIsExternal = true
        return group
    }

    deinit { wakeups.deallocate() }

    /// `dispatch_group_enter`.
    @inline(__always)
    public func enter() {
        // relaxed: an enter publishes nothing; waiters and notify acquire the matching leave's
        // releasing CAS (`leave`), a later RMW of this word.
        let old = state.wrappingAdd(1, ordering: .relaxed).oldValue
        let count = old & Self.countMask
        if count == 0 {
            holdSelf()
        } else if count == Self.countMask {
            Self.tooManyEnters()
        }
    }

    @inline(never)
    private static func tooManyEnters() -> Never {
        clientBug("dispatch_group_enter", "too many nested enters")
    }

    @inline(never)
    private static func unbalancedLeave() -> Never {
        clientBug("dispatch_group_leave", "unbalanced call to dispatch_group_leave()")
    }

    /// `dispatch_group_leave`. Inline, the common leaves: the count stays above zero, or
    /// returns to it with no waiter and no notification (one CAS, then the group drops its
    /// hold on itself). A leave that closes a generation, and an unbalanced one, go out of
    /// line (`leaveClosing`).
    @inline(__always)
    public func leave() { leave(times: 1) }

    /// `n` leaves at once, as one atomic step: a worker that ran several items of this
    /// group in a row applies their leaves together (`Worker.flushGroupLeaves`).
    @inline(__always)
    func leave(times n: UInt64) {
        // releasing: the work's writes happen-before whoever observes the group empty.
        var s = state.load(ordering: .relaxed)
        while true {
            let count = s & Self.countMask
            if count <= n && (count < n || s & (Self.hasWaiters | Self.hasNotify) != 0) {
                return leaveClosing(times: n)
            }
            let (done, now) = state.weakCompareExchange(expected: s, desired: s &- n, ordering: .acquiringAndReleasing)
            if done {
                if count == n { dropSelfHold() }
                return
            }
            s = now
        }
    }

    /// Any leave: the one that returns the count to zero with a flag set clears the flags
    /// and bumps the generation in its CAS, then wakes and notifies (`becameEmpty`).
    @inline(never)
    private func leaveClosing(times n: UInt64) {
        var s = state.load(ordering: .relaxed)
        while true {
            let count = s & Self.countMask
            if count < n { Self.unbalancedLeave() }
            var desired = s - n
            let flags = s & (Self.hasWaiters | Self.hasNotify)
            if count == n && flags != 0 {
                desired = (desired & ~(Self.hasWaiters | Self.hasNotify)) &+ Self.generationUnit
            }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .acquiringAndReleasing)
            if done {
                if count == n {
                    if flags != 0 { becameEmpty(closing: s >> 34, flags: flags) }
                    dropSelfHold()
                }
                return
            }
            s = now
        }
    }

    /// The C count reached zero. While the group is entered it holds one of those
    /// references itself (see Lifetime), so a release that takes the count to zero then
    /// released that one: the client released once more than it retained (libdispatch
    /// keeps its internal count apart from the client's and crashes here too). The leave
    /// that drops the hold has already brought the group's count to zero.
    override func externalRefsDidReachZero() {
        if selfHoldIsExternal && state.load(ordering: .acquiring) & Self.countMask != 0 {
            clientBug("dispatch_release", "over-release: the object's reference count was already zero")
        }
    }

    /// The reference the group holds on itself while its count is non-zero (see Lifetime).
    @inline(__always)
    private func holdSelf() {
        if selfHoldIsExternal {
            // Relaxed, like any retain: the enter that makes it is the caller's own use of
            // a reference it holds.
            externalRefs.wrappingAdd(1, ordering: .relaxed)
        } else {
            _ = Unmanaged.passUnretained(self).retain()
        }
    }

    @inline(__always)
    private func dropSelfHold() {
        if selfHoldIsExternal {
            releaseExternal("dispatch_group_leave")
        } else {
            Unmanaged.passUnretained(self).release()
        }
    }

    @inline(never)
    private func becameEmpty(closing generation: UInt64, flags: UInt64) {
        if flags & Self.hasWaiters != 0 {
            _ = gc_word_add(wakeups, 1)
            gc_futex_wake(wakeups, Int32.max)
        }
        if flags & Self.hasNotify == 0 { return }
        var due: [Notification] = []
        notifyLock.withLock {
            due = notifications.filter { $0.generation <= generation }
            notifications.removeAll { $0.generation <= generation }
        }
        for n in due {
            n.queue.enqueue(n.function, n.context, n.flags)
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
            let seen = gc_word_load(wakeups)
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
            _ = gc_futex_wait(wakeups, seen, remaining)
        }
    }

    /// `dispatch_group_notify_f`: submits `function(context)` to `queue` once the group is
    /// empty (at once if it is empty now). `flags` go with the item (`.barrier`: it runs
    /// as a barrier on `queue`); notifications are submitted in the order they were made.
    func notify(queue: DispatchQueue, function: DispatchFunction, context: UnsafeMutableRawPointer?,
                flags: ContinuationFlags = []) {
        let submitNow: Bool = notifyLock.withLock {
            var s = state.load(ordering: .acquiring)
            while true {
                if s & Self.countMask == 0 { return true }
                let (done, now) = state.weakCompareExchange(expected: s, desired: s | Self.hasNotify,
                                                            ordering: .acquiringAndReleasing)
                if done { break }
                s = now
            }
            notifications.append(Notification(generation: s >> 34, queue: queue, function: function,
                                              context: context, flags: flags))
            return false
        }
        if submitNow { queue.enqueue(function, context, flags) }
    }

    /// `dispatch_group_async_f`: `function(context)` runs on `queue` as a member of the
    /// group, with `flags` (`.barrier`: as a barrier on `queue`).
    @inline(__always)
    func async(queue: DispatchQueue, function: DispatchFunction, context: UnsafeMutableRawPointer?,
               flags: ContinuationFlags = []) {
        enter()
        let node = ContinuationCache.make(function, context, flags.union(.groupMember))
        // Unretained: the enter above holds the group's self-reference until the node's leave.
        node.pointee.group = Unmanaged.passUnretained(self).toOpaque()
        queue.push(node)
    }

    override func debugDescription() -> String {
        let s = state.load(ordering: .relaxed)
        // `refcount` is the client's count: the group's hold on itself (see Lifetime) is
        // not the client's reference.
        var refcount = externalRefs.load(ordering: .relaxed)
        if selfHoldIsExternal && s & Self.countMask != 0 { refcount -= 1 }
        return describe([("refcount", "\(refcount)"), ("count", "\(s & Self.countMask)"),
                         ("waiters", "\(s & Self.hasWaiters != 0)"), ("notify", "\(s & Self.hasNotify != 0)")])
    }
}
