import Synchronization

/// A pending timer: what to call, when, and how late it may be.
///
/// Lifetime: the `TimerToken` the scheduler holds, the event loop's inboxes (an unmanaged
/// +1 while the node is linked there) and the `TimerHeap` (a strong reference while the
/// node is in it) each keep the node alive.
///
/// Fields and who may touch them:
/// - `clock`, `deadline`, `latest`, `fire`, `context`, `isScheduled`: immutable after init.
/// - `state`: shared, atomic (see `TimerState`).
/// - `scheduleLink`, `cancelLink`: the intrusive links of the event loop's two inboxes.
///   Each is written once, by the thread that pushes the node, before the compare-exchange
///   that publishes it, and read by the event thread after the exchange that takes the
///   list; those two atomics order the plain accesses.
/// - `sequence`, `deadlineSlot`, `latestSlot`: the event thread only.
final class TimerNode: @unchecked Sendable {
    let clock: DispatchClock.Kind
    /// The instant the timer may fire, in nanoseconds on `clock`.
    let deadline: UInt64
    /// `deadline + leeway` (saturating at `DispatchClock.limit`): the instant it should
    /// have fired by.
    let latest: UInt64
    let fire: DispatchFunction
    let context: UnsafeMutableRawPointer?
    /// False for a FOREVER deadline: the node never enters the event loop.
    let isScheduled: Bool

    let state = Atomic<UInt8>(TimerState.pending)

    var scheduleLink: UnsafeMutableRawPointer?
    var cancelLink: UnsafeMutableRawPointer?

    /// Insertion order, breaking ties between equal deadlines (first scheduled, first fired).
    var sequence: UInt64 = 0
    /// Position in the heap's deadline order, or -1 when the node is not in a heap.
    var deadlineSlot = -1
    /// Position in the heap's latest-instant order, or -1.
    var latestSlot = -1

    init(clock: DispatchClock.Kind, deadline: UInt64, leeway: UInt64, isScheduled: Bool,
         fire: DispatchFunction, context: UnsafeMutableRawPointer?) {
        self.clock = clock
        self.deadline = deadline
        // Capped below UInt64.max, which the event loop reserves for "not armed".
        let (latest, overflow) = deadline.addingReportingOverflow(leeway)
        self.latest = overflow ? DispatchClock.limit : min(latest, DispatchClock.limit)
        self.isScheduled = isScheduled
        self.fire = fire
        self.context = context
    }
}

/// The life of a timer, in `TimerNode.state`. Every transition leaves `pending` and is a
/// compare-exchange, so exactly one of "fire" and "cancel" wins:
///
///     pending ──(event thread, deadline passed)──▶ fired
///        └─────(cancelTimer)──────────────────────▶ cancelled
///
/// Exclusivity alone would work with relaxed ordering: the node's fields are immutable and
/// were published by the inbox. The exchanges are acquiring-and-releasing so that whoever
/// wins owns the context with everything the loser did before it: a canceller that won
/// may free the context, and a `fire` callback sees the writes made before a failed
/// cancel. (On x86 a compare-exchange is a full barrier anyway.)
enum TimerState {
    static let pending: UInt8 = 0
    static let fired: UInt8 = 1
    static let cancelled: UInt8 = 2
}

/// The timers of one clock, kept in two orders at once:
///
/// - by deadline, to find every timer that is due (`popDue`) in deadline order;
/// - by latest instant (deadline + leeway), to know when the event thread must wake up
///   (`earliestLatest`).
///
/// Arming the clock's timerfd at the smallest `deadline + leeway` is the latest wakeup
/// that still honours every timer's leeway, and it is never before the earliest deadline
/// (a timer's `latest` is at least its deadline). At that wakeup every timer whose
/// deadline has passed fires: leeway coalesces timers into one wakeup. One heap keyed by
/// deadline alone cannot answer "smallest latest"; a sorted structure would cost more than
/// two binary heaps. Insert, remove and pop are O(log n); each node records its slot in
/// both heaps so a cancelled timer is removed in place.
///
/// Owned by the event thread: nothing else reads or writes a `TimerHeap`.
struct TimerHeap {
    private var byDeadline = BinaryTimerHeap<DeadlineOrder>()
    private var byLatest = BinaryTimerHeap<LatestOrder>()
    private var nextSequence: UInt64 = 0

    var count: Int { byDeadline.count }
    var isEmpty: Bool { byDeadline.count == 0 }

    /// The smallest `deadline + leeway`: when the clock's timer must next expire.
    var earliestLatest: UInt64? { byLatest.top?.latest }
    /// The smallest deadline.
    var earliestDeadline: UInt64? { byDeadline.top?.deadline }

    mutating func insert(_ node: TimerNode) {
        precondition(node.deadlineSlot < 0, "timer inserted twice")
        node.sequence = nextSequence
        nextSequence &+= 1
        byDeadline.insert(node)
        byLatest.insert(node)
    }

    /// Removes `node` if it is in the heap; returns whether it was.
    @discardableResult
    mutating func remove(_ node: TimerNode) -> Bool {
        guard node.deadlineSlot >= 0 else { return false }
        byDeadline.remove(node)
        byLatest.remove(node)
        return true
    }

    /// Removes and returns the timer with the earliest deadline if that deadline is at or
    /// before `now`.
    mutating func popDue(now: UInt64) -> TimerNode? {
        guard let top = byDeadline.top, top.deadline <= now else { return nil }
        byDeadline.remove(top)
        byLatest.remove(top)
        return top
    }
}

/// One ordering of timer nodes, for `BinaryTimerHeap`.
protocol TimerOrder {
    static func precedes(_ a: TimerNode, _ b: TimerNode) -> Bool
    static func slot(of node: TimerNode) -> Int
    static func setSlot(of node: TimerNode, to slot: Int)
}

enum DeadlineOrder: TimerOrder {
    @inline(__always)
    static func precedes(_ a: TimerNode, _ b: TimerNode) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
    }
    @inline(__always) static func slot(of node: TimerNode) -> Int { node.deadlineSlot }
    @inline(__always) static func setSlot(of node: TimerNode, to slot: Int) { node.deadlineSlot = slot }
}

enum LatestOrder: TimerOrder {
    @inline(__always)
    static func precedes(_ a: TimerNode, _ b: TimerNode) -> Bool {
        a.latest != b.latest ? a.latest < b.latest : a.sequence < b.sequence
    }
    @inline(__always) static func slot(of node: TimerNode) -> Int { node.latestSlot }
    @inline(__always) static func setSlot(of node: TimerNode, to slot: Int) { node.latestSlot = slot }
}

/// A binary min-heap of timer nodes in `Order`, which records each node's index in the
/// node itself (so removal of an arbitrary node is O(log n)). A node not in the heap has
/// slot -1.
struct BinaryTimerHeap<Order: TimerOrder> {
    private var nodes = ContiguousArray<TimerNode>()

    var count: Int { nodes.count }
    var top: TimerNode? { nodes.first }

    mutating func insert(_ node: TimerNode) {
        nodes.append(node)
        Order.setSlot(of: node, to: nodes.count - 1)
        siftUp(nodes.count - 1)
    }

    mutating func remove(_ node: TimerNode) {
        let slot = Order.slot(of: node)
        precondition(slot >= 0 && slot < nodes.count && nodes[slot] === node, "timer not in this heap")
        let last = nodes.removeLast()
        Order.setSlot(of: node, to: -1)
        guard slot < nodes.count else { return }  // it was the last one
        nodes[slot] = last
        Order.setSlot(of: last, to: slot)
        if slot > 0 && Order.precedes(last, nodes[(slot - 1) / 2]) {
            siftUp(slot)
        } else {
            siftDown(slot)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let node = nodes[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard Order.precedes(node, nodes[parent]) else { break }
            nodes[child] = nodes[parent]
            Order.setSlot(of: nodes[child], to: child)
            child = parent
        }
        nodes[child] = node
        Order.setSlot(of: node, to: child)
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let node = nodes[parent]
        let count = nodes.count
        while true {
            var child = 2 * parent + 1
            if child >= count { break }
            if child + 1 < count && Order.precedes(nodes[child + 1], nodes[child]) { child += 1 }
            guard Order.precedes(nodes[child], node) else { break }
            nodes[parent] = nodes[child]
            Order.setSlot(of: nodes[parent], to: parent)
            parent = child
        }
        nodes[parent] = node
        Order.setSlot(of: node, to: parent)
    }

    /// Debug check: every parent precedes its children and every slot is right.
    func checkInvariants() -> Bool {
        for i in nodes.indices {
            if Order.slot(of: nodes[i]) != i { return false }
            if i > 0 && Order.precedes(nodes[i], nodes[(i - 1) / 2]) { return false }
        }
        return true
    }
}

extension TimerHeap {
    /// Debug check of both orders (for tests).
    func checkInvariants() -> Bool {
        byDeadline.checkInvariants() && byLatest.checkInvariants() && byDeadline.count == byLatest.count
    }
}
