/// A queue's state word, one `Atomic<UInt64>` (`DispatchQueue.state`), changed only by
/// CAS loops and atomic adds.
///
/// ```
///  63            32 31    20     19        18        17          16        15           0
/// [ suspend count ][ unused ][WAIT_BARRIER][INACTIVE][DRAIN_WAITING][ENQUEUED][ in flight ]
/// ```
/// - `inFlight` (bits 0–15): width units in use on a concurrent queue: redirected items
///   running on the target, plus `dispatch_sync` callers holding a unit (taken directly on
///   an idle queue, or reserved for them by the drain that reached their waiter node). Always 0 on a
///   serial queue. While it is non-zero the queue holds one ARC reference to itself
///   (taken on 0 → 1, dropped on 1 → 0), so redirected items need not retain it.
/// - `ENQUEUED` (bit 16): the queue's drain lock. Set when a drain of this queue is
///   scheduled on its target or running, or when a `dispatch_sync`/`barrier_sync` caller
///   holds the queue exclusively. Whoever sets it owns the drain until they clear it; a
///   scheduled drain also owns one ARC retain of the queue. It changes hands without
///   being cleared in two places only: a drain that yields passes it (and its retain) to
///   the drain node it schedules, and a drain that reaches a waiting sync caller passes
///   it to that caller (`DrainOutcome.handedOff`; the caller gives it back through
///   `syncRelease`). A sync caller takes it directly only when the queue is idle: not
///   enqueued, nothing queued, not suspended.
/// - `DRAIN_WAITING` (bit 17): the drain owner stopped because the item at the head (a
///   barrier, or any item when the width is used up) must wait for `inFlight` to fall. The
///   drain stays owned (ENQUEUED stays set); the completion that clears this bit schedules
///   the drain again.
/// - `INACTIVE` (bit 18): created inactive; counts as suspended until `dispatch_activate`.
/// - `WAIT_BARRIER` (bit 19): with DRAIN_WAITING, the waiting item is a barrier: only
///   `inFlight == 0` releases it (otherwise any freed unit of width does).
/// - suspend count (bits 32–63): `dispatch_suspend` adds one, `dispatch_resume` removes one.
///
/// A queue runs items only while it is neither suspended nor inactive.
struct QueueState: Equatable {
    var rawValue: UInt64

    static let inFlightMask: UInt64 = 0xFFFF
    static let enqueued: UInt64 = 1 << 16
    static let drainWaiting: UInt64 = 1 << 17
    static let inactive: UInt64 = 1 << 18
    static let waitingForBarrier: UInt64 = 1 << 19
    static let suspendUnit: UInt64 = 1 << 32
    static let suspendMask: UInt64 = 0xFFFF_FFFF << 32

    @inline(__always) init(_ raw: UInt64) { rawValue = raw }

    @inline(__always) var inFlight: UInt64 { rawValue & Self.inFlightMask }
    @inline(__always) var isEnqueued: Bool { rawValue & Self.enqueued != 0 }
    @inline(__always) var isDrainWaiting: Bool { rawValue & Self.drainWaiting != 0 }
    @inline(__always) var isInactive: Bool { rawValue & Self.inactive != 0 }
    @inline(__always) var suspendCount: UInt64 { rawValue >> 32 }
    /// Suspended or inactive: no item may start.
    @inline(__always) var isSuspended: Bool { rawValue & (Self.suspendMask | Self.inactive) != 0 }
}
