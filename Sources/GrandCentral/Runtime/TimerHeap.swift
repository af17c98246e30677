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
/// Computing A. The timers are kept in two binary heaps at once: by deadline (to pop every
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
/// Owned by the event thread: nothing else reads or writes a `TimerHeap`.
struct TimerHeap {
    private var byDeadline = BinaryTimerHeap<DeadlineOrder>()
    private var byLatest = BinaryTimerHeap<LatestOrder>()
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
    var earliestLatest: UInt64? { byLatest.top?.latest }
    /// The smallest deadline.
    var earliestDeadline: UInt64? { byDeadline.top?.deadline }

    /// A: the instant the clock's timerfd should expire, nil when there is no timer.
    mutating func wakeupInstant() -> UInt64? {
        guard let bound = byLatest.top?.latest else { return nil }
        if wakeupIsCurrent { return cachedWakeup }
        walks += 1
        var best: UInt64 = 0
        let count = byDeadline.count
        walk.removeAll(keepingCapacity: true)
        walk.append(0)
        while let slot = walk.popLast() {
            let deadline = byDeadline.deadline(at: slot)
            if deadline > bound { continue }  // and so is every deadline below it
            if deadline > best { best = deadline }
            let child = 2 &* slot &+ 1
            if child < count { walk.append(child) }
            if child &+ 1 < count { walk.append(child &+ 1) }
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
        let oldBound = byLatest.top?.latest
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
        let oldBound = byLatest.top!.latest
        byDeadline.remove(node)
        byLatest.remove(node)
        noteRemoval(of: node, oldBound: oldBound)
        return true
    }

    /// Removes and returns the timer with the earliest deadline if that deadline is at or
    /// before `now`.
    mutating func popDue(now: UInt64) -> TimerNode? {
        guard let top = byDeadline.top, top.deadline <= now else { return nil }
        let oldBound = byLatest.top!.latest
        byDeadline.remove(top)
        byLatest.remove(top)
        noteRemoval(of: top, oldBound: oldBound)
        return top
    }

    /// Keeps the cached A after a removal: unchanged when L did not move and the node was
    /// neither the timer at A nor in the group (a deadline below A, or after L).
    private mutating func noteRemoval(of node: TimerNode, oldBound: UInt64) {
        guard wakeupIsCurrent else { return }
        guard let bound = byLatest.top?.latest else { return }  // empty: current, nil
        if bound == oldBound && (node.deadline < cachedWakeup || node.deadline > oldBound) { return }
        wakeupIsCurrent = false
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
    fileprivate var nodes = ContiguousArray<TimerNode>()

    var count: Int { nodes.count }
    var top: TimerNode? { nodes.first }

    /// The key of the node at `slot` (for the wakeup walk).
    @inline(__always)
    func deadline(at slot: Int) -> UInt64 { nodes[slot].deadline }

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

    /// A by brute force over every node (for tests of `wakeupInstant()`).
    func wakeupByBruteForce() -> UInt64? {
        guard let bound = earliestLatest else { return nil }
        return byDeadline.allNodes.lazy.map(\.deadline).filter { $0 <= bound }.max()
    }
}

extension BinaryTimerHeap {
    var allNodes: ContiguousArray<TimerNode> { nodes }
}
