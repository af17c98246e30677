import Synchronization

/// The timers of one clock, and the policy that decides when the event thread wakes up
/// for them.
///
/// The policy. A timer never fires early, and a timer with nothing to coalesce with fires
/// at its deadline (within scheduler noise), whatever its leeway. Leeway exists only so
/// that timers whose windows [dᵢ, dᵢ + lᵢ] overlap can share one wakeup. So the clock's
/// timerfd is armed at
///
///     A = max { dᵢ : dᵢ ≤ L },   L = min over j of (dⱼ + lⱼ)
///
/// the latest deadline among the timers whose deadline is not after the earliest window
/// end, and at that wakeup every timer whose deadline has passed fires. Each timer in that
/// group has dᵢ ≤ A ≤ L ≤ dᵢ + lᵢ: it fires inside its window, and the group fires
/// together. Every other timer has its deadline after L, so it is not due yet. A lone timer
/// has A = its deadline. Rejected: arming at L (what this heap did before: every timer
/// fired as late as its leeway allowed, so a lone 6 s `dispatch_after` with the default
/// 10 % leeway fired at 6.6 s), and libdispatch's fixed coalescing windows per QoS
/// (simpler, but they move the fire time of a timer that has nothing to coalesce with).
///
/// Computing A. The timers are kept in two heaps at once: by deadline (to pop every
/// due timer in deadline order, `popDue`) and by latest instant (its top is L). A is the
/// largest deadline ≤ L in the deadline heap: a walk from the root that prunes every node
/// whose deadline is after L (its children's deadlines are later still). The walk visits
/// the timers that will fire at A, plus at most two pruned children of each, so its cost
/// is paid for by the fires it precedes. It is cached: inserting a timer updates A in O(1)
/// unless the timer lowers L below A, and removing one leaves A alone unless it was the
/// timer at A or at L; only then does `wakeupInstant()` walk again. With 10,000 timers an
/// hour away and nothing changing, asking costs one comparison. Insert, remove and pop
/// stay O(log n); each node records its slot in both heaps so it is removed in place.
///
/// Owned by the event thread: nothing else reads or writes a `TimerHeap`. The heap holds
/// one strong reference to each node in it (taken by `insert`, given up by `remove` and
/// `popDue`), kept unmanaged so that sifting moves plain words; a heap dropped with timers
/// still in it leaks them (the event loop's heaps live as long as the process; tests
/// drop a few).
struct TimerHeap {
    private var byDeadline = TimerHeapOrdering<DeadlineOrder>()
    private var byLatest = TimerHeapOrdering<LatestOrder>()
    private var nextSequence: UInt64 = 0
    /// A, when `wakeupIsCurrent`.
    private var cachedWakeup: UInt64 = 0
    /// False when an insertion or removal may have changed A in a way the O(1) update
    /// cannot follow. True for an empty heap.
    private var wakeupIsCurrent = true
    /// The walk's stack of slots, kept to avoid an allocation per walk.
    private var walk = ContiguousArray<Int>()
    /// How many walks `wakeupInstant()` made (for tests of the cache).
    private(set) var walks = 0

    var count: Int { byDeadline.count }
    var isEmpty: Bool { byDeadline.count == 0 }

    /// L: the smallest `deadline + leeway`.
    var earliestLatest: UInt64? { byLatest.topKey }
    /// The smallest deadline.
    var earliestDeadline: UInt64? { byDeadline.topKey }

    /// A: the instant the clock's timerfd should expire, nil when there is no timer.
    mutating func wakeupInstant() -> UInt64? {
        guard let bound = byLatest.topKey else { return nil }
        if wakeupIsCurrent { return cachedWakeup }
        walks += 1
        var best: UInt64 = 0
        let count = byDeadline.count
        walk.removeAll(keepingCapacity: true)
        walk.append(0)
        while let slot = walk.popLast() {
            let deadline = byDeadline.key(at: slot)
            if deadline > bound { continue }  // and so is every deadline below it
            if deadline > best { best = deadline }
            var child = TimerHeapOrdering<DeadlineOrder>.firstChild(of: slot)
            let end = min(child &+ 4, count)
            while child < end {
                walk.append(child)
                child &+= 1
            }
        }
        cachedWakeup = best
        wakeupIsCurrent = true
        return best
    }

    /// Inserts `node` with its `deadline` and `latest` (the event thread sets them first).
    mutating func insert(_ node: TimerNode) {
        precondition(node.deadlineSlot < 0, "timer inserted twice")
        node.sequence = nextSequence
        nextSequence &+= 1
        let oldBound = byLatest.topKey
        // The heap's strong reference, released when the node leaves (remove, popDue).
        _ = Unmanaged.passRetained(node)
        byDeadline.insert(node)
        byLatest.insert(node)
        guard wakeupIsCurrent else { return }
        guard let oldBound else {
            cachedWakeup = node.deadline  // a lone timer: A is its deadline
            return
        }
        if node.latest >= oldBound {
            // L stays; the node joins the group if its deadline is within it.
            if node.deadline <= oldBound && node.deadline > cachedWakeup { cachedWakeup = node.deadline }
        } else if cachedWakeup <= node.latest {
            // L drops to node.latest but not below A: the timer at A stays in the group,
            // which loses only deadlines above the new L (none are above A), and gains
            // the node (its deadline is at most its latest).
            if node.deadline > cachedWakeup { cachedWakeup = node.deadline }
        } else {
            wakeupIsCurrent = false
        }
    }

    /// Removes `node` if it is in the heap; returns whether it was.
    @discardableResult
    mutating func remove(_ node: TimerNode) -> Bool {
        guard node.deadlineSlot >= 0 else { return false }
        let oldBound = byLatest.topKey!
        byDeadline.remove(node)
        byLatest.remove(node)
        noteRemoval(of: node, oldBound: oldBound)
        Unmanaged.passUnretained(node).release()  // the caller still holds one
        return true
    }

    /// Removes and returns the timer with the earliest deadline if that deadline is at or
    /// before `now`.
    mutating func popDue(now: UInt64) -> TimerNode? {
        guard let key = byDeadline.topKey, key <= now else { return nil }
        let top = byDeadline.top!
        let oldBound = byLatest.topKey!
        byDeadline.remove(top)
        byLatest.remove(top)
        noteRemoval(of: top, oldBound: oldBound)
        Unmanaged.passUnretained(top).release()  // `top` is the caller's reference now
        return top
    }

    /// Keeps the cached A after a removal: unchanged when L did not move and the node was
    /// neither the timer at A nor in the group (a deadline below A, or after L).
    private mutating func noteRemoval(of node: TimerNode, oldBound: UInt64) {
        guard wakeupIsCurrent else { return }
        guard let bound = byLatest.topKey else { return }  // empty: current, nil
        if bound == oldBound && (node.deadline < cachedWakeup || node.deadline > oldBound) { return }
        wakeupIsCurrent = false
    }
}

/// One ordering of timer nodes, for `TimerHeapOrdering`.
protocol TimerOrder {
    static func key(of node: TimerNode) -> UInt64
    static func slot(of node: TimerNode) -> Int
    static func setSlot(of node: TimerNode, to slot: Int)
}

enum DeadlineOrder: TimerOrder {
    @inline(__always) static func key(of node: TimerNode) -> UInt64 { node.deadline }
    @inline(__always) static func slot(of node: TimerNode) -> Int { node.deadlineSlot }
    @inline(__always) static func setSlot(of node: TimerNode, to slot: Int) { node.deadlineSlot = slot }
}

enum LatestOrder: TimerOrder {
    @inline(__always) static func key(of node: TimerNode) -> UInt64 { node.latest }
    @inline(__always) static func slot(of node: TimerNode) -> Int { node.latestSlot }
    @inline(__always) static func setSlot(of node: TimerNode, to slot: Int) { node.latestSlot = slot }
}

/// A heap entry: the node's key and tie-breaker copied next to it, so that sifting and the
/// wakeup walk compare entries in one contiguous array without loading the nodes (with
/// 100,000 timers, chasing node pointers was most of the event thread's time). A node's
/// key does not change while it is in a heap: the event thread takes a node out before
/// it changes its deadline or latest instant.
struct TimerHeapEntry {
    var key: UInt64
    var sequence: UInt64
    /// Unowned here: `TimerHeap` holds the one strong reference for both orders.
    var node: Unmanaged<TimerNode>

    @inline(__always)
    func precedes(_ other: TimerHeapEntry) -> Bool {
        key != other.key ? key < other.key : sequence < other.sequence
    }
}

/// A 4-ary min-heap of timer nodes in `Order`, which records each node's index in the node
/// itself (so removal of an arbitrary node is O(log n)). A node not in the heap has slot
/// -1. Four children per node rather than two: half the depth, and the four children sit
/// in one or two cache lines, so a sift touches fewer lines.
struct TimerHeapOrdering<Order: TimerOrder> {
    private var entries = ContiguousArray<TimerHeapEntry>()

    var count: Int { entries.count }
    var top: TimerNode? { entries.first?.node.takeUnretainedValue() }
    var topKey: UInt64? { entries.first?.key }

    /// The key at `slot` (for the wakeup walk).
    @inline(__always)
    func key(at slot: Int) -> UInt64 { entries[slot].key }

    /// The slots of the children of `slot`: `firstChild(of:) ..< min(+4, count)`.
    @inline(__always)
    static func firstChild(of slot: Int) -> Int { 4 &* slot &+ 1 }

    mutating func insert(_ node: TimerNode) {
        entries.append(TimerHeapEntry(key: Order.key(of: node), sequence: node.sequence,
                                      node: Unmanaged.passUnretained(node)))
        siftUp(entries.count - 1)
    }

    mutating func remove(_ node: TimerNode) {
        let slot = Order.slot(of: node)
        precondition(slot >= 0 && slot < entries.count && entries[slot].node.toOpaque() == Unmanaged.passUnretained(node).toOpaque(),
                     "timer not in this heap")
        let last = entries.removeLast()
        Order.setSlot(of: node, to: -1)
        guard slot < entries.count else { return }  // it was the last one
        entries[slot] = last
        if slot > 0 && last.precedes(entries[(slot &- 1) / 4]) {
            siftUp(slot)
        } else {
            siftDown(slot)
        }
    }

    @inline(__always)
    private func place(_ entry: TimerHeapEntry, at slot: Int) {
        entry.node._withUnsafeGuaranteedRef { Order.setSlot(of: $0, to: slot) }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let entry = entries[child]
        while child > 0 {
            let parent = (child &- 1) / 4
            guard entry.precedes(entries[parent]) else { break }
            entries[child] = entries[parent]
            place(entries[child], at: child)
            child = parent
        }
        entries[child] = entry
        place(entry, at: child)
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let entry = entries[parent]
        let count = entries.count
        while true {
            let first = Self.firstChild(of: parent)
            if first >= count { break }
            var best = first
            let end = min(first &+ 4, count)
            var child = first &+ 1
            while child < end {
                if entries[child].precedes(entries[best]) { best = child }
                child &+= 1
            }
            guard entries[best].precedes(entry) else { break }
            entries[parent] = entries[best]
            place(entries[parent], at: parent)
            parent = best
        }
        entries[parent] = entry
        place(entry, at: parent)
    }

    /// Debug check: every parent precedes its children, every slot and key is right.
    func checkInvariants() -> Bool {
        for i in entries.indices {
            let node = entries[i].node.takeUnretainedValue()
            if Order.slot(of: node) != i || Order.key(of: node) != entries[i].key { return false }
            if i > 0 && entries[i].precedes(entries[(i - 1) / 4]) { return false }
        }
        return true
    }

    /// Every key (for tests).
    var allKeys: [UInt64] { entries.map(\.key) }
}

extension TimerHeap {
    /// Debug check of both orders (for tests).
    func checkInvariants() -> Bool {
        byDeadline.checkInvariants() && byLatest.checkInvariants() && byDeadline.count == byLatest.count
    }

    /// A by brute force over every node (for tests of `wakeupInstant()`).
    func wakeupByBruteForce() -> UInt64? {
        guard let bound = earliestLatest else { return nil }
        return byDeadline.allKeys.filter { $0 <= bound }.max()
    }
}
