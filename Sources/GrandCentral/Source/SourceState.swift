/// A source's state word, one `Atomic<UInt64>` (`SourceCore.state`), changed only by CAS
/// loops and atomic adds/ors — the source's counterpart of `QueueState`.
///
/// ```
///  63            32 31      9     8         7          6           5           4          3        2        1         0
/// [ suspend count ][ unused ][WAITING][STARTED][REGISTRATION][CANCEL_DONE][STOPPED][CANCELLED][PENDING][ENQUEUED][INACTIVE]
/// ```
/// - `INACTIVE` (bit 0): created inactive (every source is); counts as suspended until
///   `dispatch_activate` or the first `dispatch_resume` clears it.
/// - `ENQUEUED` (bit 1): the source's drain lock. Set by whoever schedules a drain of the
///   source on its target queue; the drain owns it (and one ARC retain of the core) until
///   `tryUnlockDrain` clears it. So at most one drain runs at a time, and an event handler
///   never runs concurrently with itself, whatever the target's width.
/// - `PENDING` (bit 2): an event was merged into `pendingData` and not yet taken by a drain.
///   Set by the merging thread (the event thread, or a `dispatch_source_merge_data` caller)
///   after it updated `pendingData`; cleared by the drain before it takes `pendingData`.
/// - `CANCELLED` (bit 3): `dispatch_source_cancel` was called (or the last reference went
///   away). Final. No event handler starts after a drain has seen it.
/// - `STOPPED` (bit 4): the monitor has stopped (`monitorDidStop`): no event will be merged
///   again, so the cancel handler may run. Set once, after CANCELLED.
/// - `CANCEL_DONE` (bit 5): the drain ran the cancel handler (or found none) and dropped the
///   handlers. Final.
/// - `REGISTRATION` (bit 6): the registration handler is due (set on activation, cleared
///   by the drain that runs it).
/// - `STARTED` (bit 7): the monitor was started (activation happened); `stop` is owed.
/// - `WAITING` (bit 8): ENQUEUED is held by a drain node that sits on a queue and is not
///   running: set with ENQUEUED by `wakeup`, and again by a yielding drain (`yieldDrain`)
///   before its node is pushed back; cleared (an atomic and) by the drain first thing when
///   its node runs. While it is set the lock's owner runs no code that reads the handlers,
///   the data or this word, so `dispatch_source_cancel_and_wait` may complete a
///   cancellation in the drain's place:
///   with CANCELLED and STOPPED set and CANCEL_DONE clear, a CAS that expects WAITING (or
///   no ENQUEUED at all) sets CANCEL_DONE and clears REGISTRATION. Both the CAS and the
///   drain's clear are read-modify-writes of this word, so exactly one of them comes first:
///   either the CAS fails and the drain completes the cancellation itself, or the drain,
///   when it runs (after a suspended target's resume), finds no work, runs no handler, and
///   gives the lock and its node's retain back as any drain does.
/// - suspend count (bits 32–63): `dispatch_suspend` adds one, `dispatch_resume` removes one.
///
/// The drain has work when the source is not suspended and one of: an event is pending and
/// the source is not cancelled; the registration handler is due; the source is cancelled,
/// its monitor stopped, and the cancel handler has not run. A cancelled source that is
/// suspended keeps its cancel handler until it is resumed, as in libdispatch.
struct SourceState: Equatable {
    var rawValue: UInt64

    static let inactive: UInt64 = 1 << 0
    static let enqueued: UInt64 = 1 << 1
    static let pending: UInt64 = 1 << 2
    static let cancelled: UInt64 = 1 << 3
    static let stopped: UInt64 = 1 << 4
    static let cancelDone: UInt64 = 1 << 5
    static let registration: UInt64 = 1 << 6
    static let started: UInt64 = 1 << 7
    static let waiting: UInt64 = 1 << 8
    static let suspendUnit: UInt64 = 1 << 32
    static let suspendMask: UInt64 = 0xFFFF_FFFF << 32

    @inline(__always) init(_ raw: UInt64) { rawValue = raw }

    @inline(__always) func has(_ bit: UInt64) -> Bool { rawValue & bit != 0 }
    @inline(__always) var suspendCount: UInt64 { rawValue >> 32 }
    /// Suspended or inactive: the drain does nothing.
    @inline(__always) var isSuspended: Bool { rawValue & (Self.suspendMask | Self.inactive) != 0 }

    /// Whether a drain would find something to do (see the type's comment).
    @inline(__always) var hasWork: Bool {
        if isSuspended { return false }
        if has(Self.registration) { return true }
        if has(Self.cancelled) { return has(Self.stopped) && !has(Self.cancelDone) }
        return has(Self.pending)
    }
}
