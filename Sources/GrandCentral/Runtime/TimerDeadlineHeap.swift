// The deadline-ordered storage under `TimerHeap` (TimerHeap.swift has the wakeup policy).
// Event thread only, like the heap that owns it.

/// A heap entry: the arm's deadline, window end and tie-breaker next to the node, so that
/// sifting and the wakeup walk read one contiguous array without loading the nodes (with
/// 100,000 timers, chasing node pointers was most of the event thread's time). The entry
/// is the only copy of the arm the heap holds the node at: the node keeps none (a timer
/// source is one node, and two words less per node made it a smaller malloc chunk; see
/// TimerNode on layout). A node's arm does not change while it is in the heap: the event
/// thread takes a node out before it inserts it again with another.
struct TimerHeapEntry {
    var deadline: UInt64
    var latest: UInt64
    var sequence: UInt64
    /// Unowned here: `TimerHeap` holds the strong reference.
    var node: Unmanaged<TimerNode>

    /// `sequence`: insertion order, breaking ties between equal deadlines (first armed,
    /// first fired); kept here only, not in the node (a word less per timer source).
    init(_ node: TimerNode, deadline: UInt64, latest: UInt64, sequence: UInt64) {
        self.deadline = deadline
        self.latest = latest
        self.sequence = sequence
        self.node = Unmanaged.passUnretained(node)
    }

    /// Deadline order; equal deadlines in insertion order (first armed, first fired).
    @inline(__always)
    func precedes(_ other: TimerHeapEntry) -> Bool {
        deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
    }
}

/// A 4-ary min-heap of timer entries by deadline, which records each node's index in the
/// node itself (`deadlineSlot`, so removal of an arbitrary node is O(log n)); a node not in
/// the heap has slot -1. Four children per node rather than two: half the depth, and the
/// four children sit in one or two cache lines, so a sift touches fewer lines.
struct TimerDeadlineHeap {
    private var entries = ContiguousArray<TimerHeapEntry>()

    var count: Int { entries.count }

    @inline(__always)
    subscript(slot: Int) -> TimerHeapEntry { entries[slot] }

    /// The first child of `slot`; its children are `firstChild ..< min(firstChild + 4, count)`.
    @inline(__always)
    static func firstChild(of slot: Int) -> Int { 4 &* slot &+ 1 }

    mutating func insert(_ entry: TimerHeapEntry) {
        entries.append(entry)
        siftUp(entries.count - 1)
    }

    /// Removes `node`; returns its entry (the arm it was in the heap with).
    @discardableResult
    mutating func remove(_ node: TimerNode) -> TimerHeapEntry {
        let slot = node.deadlineSlot
        precondition(slot >= 0 && slot < entries.count
                     && entries[slot].node.toOpaque() == Unmanaged.passUnretained(node).toOpaque(),
                     "timer not in this heap")
        let removed = entries[slot]
        let last = entries.removeLast()
        node.deadlineSlot = TimerNode.notInHeap
        guard slot < entries.count else { return removed }  // it was the last one
        entries[slot] = last
        if slot > 0 && last.precedes(entries[(slot &- 1) / 4]) {
            siftUp(slot)
        } else {
            siftDown(slot)
        }
        return removed
    }

    @inline(__always)
    private func place(_ entry: TimerHeapEntry, at slot: Int) {
        entry.node._withUnsafeGuaranteedRef { $0.deadlineSlot = slot }
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

    /// Debug check: every parent precedes its children, every slot is right.
    func checkInvariants() -> Bool {
        for i in entries.indices {
            if entries[i].node.takeUnretainedValue().deadlineSlot != i { return false }
            if i > 0 && entries[i].precedes(entries[(i - 1) / 4]) { return false }
        }
        return true
    }
}
