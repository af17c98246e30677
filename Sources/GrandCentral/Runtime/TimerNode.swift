import Glibc
import Synchronization

/// A timer of the event loop: what to call, and the arm (deadline, leeway) it should be
/// in the heap with. One node serves a timer for its whole life: arming it again (a new
/// deadline or leeway, a repeating timer's next fire), suspending, resuming and cancelling
/// change this node, never allocate another.
///
/// Protocol. The owner (the thread that made the node: `dispatch_after`, or a timer
/// source) never touches the heap. It writes what it wants into `request` under
/// `requestLock`, and if the node is not already waiting in the event loop's timer inbox
/// it pushes it there (`request.isQueued`). The event thread takes the inbox, copies each
/// node's request under the lock, and makes the heap agree with it
/// (`EventLoop.applyTimerRequest`, EventLoopTimers.swift). Requests coalesce: the event
/// thread only ever sees the latest arm, so a source that re-arms a thousand times before
/// the event thread looks costs one heap update.
/// Rejected: one command object per request (an allocation per `dispatch_source_set_timer`
/// and a queue of stale commands to replay), and lock-free fields without the lock (a
/// deadline and its leeway are two words that must change together, and "fire" has to be
/// decided against "cancel" and "re-arm" atomically; a lock held for a handful of stores,
/// only ever contended by the owner against the event thread, is simpler than a seqlock
/// and as fast uncontended).
///
/// Firing. When the node's deadline has passed, the event thread takes it out of the heap
/// and, under the lock, fires it only if no request is waiting (`isQueued` is false: the
/// heap entry is the owner's latest word). It records the fire (`armFired`), releases
/// the lock, and calls `fire(context)` on the event thread. A fired arm is spent: the node
/// stays out of the heap until it is armed again. A fire that lost to a waiting request is
/// not lost if the request still wants it: applying the request puts the node back, and
/// its deadline has passed, so it fires in the same pass.
///
/// Cancelling is final. It is decided at once under the lock (`cancel` returns whether it
/// prevented a fire: true means `fire` is never called again) and completed on the event
/// thread: the node leaves the heap, then `completion(context)` runs there. Every
/// `fire` call happens on the event thread before the completion, so an owner that runs
/// its cancel handler from the completion runs it after the last fire was delivered.
///
/// Lifetime: the owner's reference, the timer inbox (an unmanaged +1 while the node is
/// linked there) and the heap (a strong reference while the node is in it) each keep the
/// node alive.
///
/// Fields and who may touch them:
/// - `fire`, `context`: set at init, and again only on a pooled one-shot node by the thread
///   that takes it from the pool (see `TimerNodePool`).
/// - `returnsToPool`: immutable.
/// - `requestLock`, `request`: `request` only under `requestLock`, by any thread.
/// - `inboxLink`: the timer inbox's intrusive link. Written by the pushing thread before
///   the compare-exchange that publishes the node, read by the event thread after the
///   exchange that takes the list; those two atomics order the plain accesses. A node is
///   in the inbox at most once (`request.isQueued`).
/// - `clock`, `appliedArm`, `deadlineSlot`, `isRetired`: the event thread only: the arm the
///   node is in the heap with (its deadline, window end and tie-breaking insertion order
///   live in the heap entry, `TimerHeapEntry`, not here); a `fire` callback (which runs on
///   the event thread) may read `appliedArm` to know which arm is firing.
/// Not final: a timer source's monitor is a subclass (`SourceTimer`), so a timer source
/// costs one object for its node and its schedule.
class TimerNode: @unchecked Sendable {
    // Declared widest first: Swift lays stored properties out in declaration order, and a
    // timer source is one of these per source (10,000 armed timers are a benchmark row).
    /// Set at init. A one-shot node from `TimerNodePool` gets new ones from the thread
    /// that takes it from the pool, before `armTimer` publishes it: the inbox push (a
    /// release) and the event thread's take (an acquire) order them before its reads.
    var fire: DispatchFunction
    var context: UnsafeMutableRawPointer?

    var inboxLink: UnsafeMutableRawPointer?

    /// The number (`TimerRequest.arm`) of the arm the node is in the heap with (its clock
    /// is `clock`, its deadline and window end are in its heap entry).
    var appliedArm: UInt64 = 0

    // The request ends in 6 bytes (the clock and five flags) and the two bytes below fill
    // its word, so `slot32` starts the next one and the last bytes leave a timer source's
    // own lock room before its schedule's first word: 131 bytes, a 144-byte malloc chunk
    // (the fields in another order: 139, a 160-byte chunk).
    var request = TimerRequest()
    let requestLock = TimerRequestLock()
    /// The clock of the arm in the heap.
    var clock: DispatchClock.Kind = .uptime
    /// `deadlineSlot`'s storage: 32 bits (a heap of 2^31 timers would be 64 GiB of entries).
    private var slot32: Int32 = -1
    /// Set once the event thread has completed a cancel: the node is done.
    var isRetired = false
    /// A one-shot node of `EventLoop.scheduleOneShot` (dispatch_after): once it has fired,
    /// the event thread gives it to the loop's `TimerNodePool` for the next one.
    let returnsToPool: Bool

    /// Position in its clock's heap; `notInHeap`, or `inDueBatch` (see `TimerHeap`).
    var deadlineSlot: Int {
        @inline(__always) get { Int(slot32) }
        @inline(__always) set { slot32 = Int32(truncatingIfNeeded: newValue) }
    }
    static let notInHeap = -1
    static let inDueBatch = -2
    /// In its clock's heap or due batch.
    var isInHeap: Bool { deadlineSlot != TimerNode.notInHeap }

    init(fire: DispatchFunction, context: UnsafeMutableRawPointer?, returnsToPool: Bool = false) {
        self.fire = fire
        self.context = context
        self.returnsToPool = returnsToPool
    }

    /// A node for tests of `TimerHeap`, with the arm in its request (which the heap itself
    /// never reads; the tests' `TimerHeap.insert(_:now:)` passes it on).
    convenience init(clock: DispatchClock.Kind, deadline: UInt64, leeway: UInt64,
                     fire: DispatchFunction, context: UnsafeMutableRawPointer?) {
        self.init(fire: fire, context: context)
        self.clock = clock
        request.clock = clock
        request.deadline = deadline
        request.latest = TimerNode.latest(deadline: deadline, leeway: leeway)
    }

    /// `deadline + leeway`, capped at `DispatchClock.limit` (below UInt64.max, which the
    /// event loop reserves for "not armed").
    static func latest(deadline: UInt64, leeway: UInt64) -> UInt64 {
        let (sum, overflow) = deadline.addingReportingOverflow(leeway)
        return overflow ? DispatchClock.limit : min(sum, DispatchClock.limit)
    }
}

/// What the owner wants of its timer, and what the event thread has done with it. Guarded
/// by the node's `requestLock`; a plain struct so that the event thread copies it in one go.
struct TimerRequest {
    // Words first, then bytes (see TimerNode on layout).
    /// The number of the latest arm; 0 before the first. Each `EventLoop.armTimer` adds 1.
    var arm: UInt64 = 0
    /// The instant the arm may fire, in nanoseconds on `clock`.
    var deadline: UInt64 = 0
    /// `deadline + leeway`, saturating at `DispatchClock.limit`: the instant it should
    /// have fired by.
    var latest: UInt64 = 0
    /// The cancel's completion, called with the node's `context` (one word: every owner's
    /// completion wants the context its `fire` gets).
    var completion: DispatchFunction? = nil
    /// The arm's clock, or nil when it never fires (FOREVER).
    var clock: DispatchClock.Kind? = nil
    /// Set by the event thread when it commits to firing the current arm (a request
    /// waiting means it does not: see "Firing"), cleared by each new arm. (A flag, not the
    /// number of the fired arm: with no request waiting, the arm in the heap is `arm`.)
    var armFired = false
    /// False before the first arm and after `disarmTimer`.
    var isArmed = false
    /// Suspended: out of the heap, keeping its arm.
    var isSuspended = false
    /// Cancelled: final. The completion runs on the event thread.
    var isCancelled = false
    /// True while the node is in the event loop's timer inbox, waiting to be applied.
    var isQueued = false

    /// Whether the node belongs in the heap: armed for an instant, not suspended, not
    /// cancelled, and that arm not fired yet.
    var wantsHeap: Bool {
        isArmed && clock != nil && !isSuspended && !isCancelled && !armFired
    }
}

/// The lock of a timer's request: a test-and-test-and-set spin lock that yields the CPU
/// after a short spin. It is held for a few loads and stores, and only the owner and the
/// event thread ever take it, so it is almost never contended; when it is, the holder is
/// nearly done (the yield covers a holder that was preempted). Acquire on taking it and
/// release on giving it back are what a lock needs: everything written under it
/// happens-before whatever the next holder reads.
struct TimerRequestLock: ~Copyable {
    private let taken = Atomic<Bool>(false)

    init() {}

    @inline(__always)
    func lock() {
        if !taken.exchange(true, ordering: .acquiring) { return }
        var spins = 0
        while true {
            while taken.load(ordering: .relaxed) {
                spins += 1
                if spins >= 64 {
                    sched_yield()
                    spins = 0
                }
            }
            if !taken.exchange(true, ordering: .acquiring) { return }
        }
    }

    @inline(__always)
    func unlock() {
        taken.store(false, ordering: .releasing)
    }

    @inline(__always)
    func withLock<R>(_ body: () -> R) -> R {
        lock()
        defer { unlock() }
        return body()
    }
}

/// Spent one-shot nodes (`EventLoop.scheduleOneShot`: `dispatch_after`), kept for the next
/// one, so that a `dispatch_after` in steady state neither allocates a node on the
/// submitting thread nor frees one on the event thread (a malloc here and a free of another
/// thread's block there, per call, before).
///
/// Protocol. Only a node that nothing else references is given: a one-shot node has no
/// token, so once its single arm has fired nobody can arm, suspend or cancel it again, and
/// the event thread gives it back right after calling its `fire`. Any thread takes one,
/// sets its `fire` and `context` and arms it (a fired node's arm is spent, so `armTimer`
/// puts it back into the heap as a new arm). The stack is linked through the nodes'
/// `inboxLink`, unused while a node is pooled (it is in no inbox), and holds one strong
/// reference to each node. A short spin lock guards it: the only contention is one
/// submitting thread against the event thread, each holding it for a few stores. At most
/// `capacity` nodes are kept (a burst of 100,000 afters does not stay allocated); beyond
/// that a spent node is freed as before. Rejected: a lock-free stack (several takers make
/// its pop an ABA problem, and a per-thread cache would strand nodes on threads that stop
/// submitting).
final class TimerNodePool: @unchecked Sendable {
    private let lock = TimerRequestLock()
    /// Retained nodes, linked through `inboxLink`. Under `lock`.
    private var head: UnsafeMutableRawPointer?
    private var count = 0
    static let capacity = 1024

    init() {}

    /// A spent one-shot node, or nil when the pool is empty. Any thread.
    func take() -> TimerNode? {
        lock.lock()
        guard let top = head else {
            lock.unlock()
            return nil
        }
        let node = Unmanaged<TimerNode>.fromOpaque(top)
        head = node._withUnsafeGuaranteedRef { $0.inboxLink }
        count -= 1
        lock.unlock()
        return node.takeRetainedValue()
    }

    /// Keeps `node` (a one-shot node that has fired) unless the pool is full. Event thread.
    func give(_ node: TimerNode) {
        lock.lock()
        if count == Self.capacity {
            lock.unlock()
            return
        }
        node.inboxLink = head
        head = Unmanaged.passRetained(node).toOpaque()
        count += 1
        lock.unlock()
    }
}

/// A one-shot timer scheduled with `EventLoop.scheduleTimer`, for `EventLoop.cancelTimer`.
struct TimerToken: Sendable {
    let node: TimerNode
}

/// The timer inbox's link field.
enum TimerInboxLink: EventLoopInboxLink {
    static func next(of node: TimerNode) -> UnsafeMutableRawPointer? { node.inboxLink }
    static func setNext(of node: TimerNode, to next: UnsafeMutableRawPointer?) { node.inboxLink = next }
}
