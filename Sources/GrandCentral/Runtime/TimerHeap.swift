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
/// has A = its deadline. A pass of the event thread that comes before A (woken by its
/// inbox, or by the timerfd of an instant that a newly arrived timer has since moved
/// later) fires nothing: every due timer is in the group and can wait for A. Rejected: arming at L (what this heap did before: every timer
/// fired as late as its leeway allowed, so a lone 6 s `dispatch_after` with the default
/// 10 % leeway fired at 6.6 s), and libdispatch's fixed coalescing windows per QoS
/// (simpler, but they move the fire time of a timer that has nothing to coalesce with).
///
/// Computing L and A. The timers are in one heap, ordered by deadline (`popDue` takes every
/// due timer in deadline order). L needs no second heap: a timer whose deadline is after L
/// has its window end after L too, so L is the smallest window end among the group
/// { dᵢ ≤ L } itself. `wakeupInstant()` visits the heap best-first, in deadline order
/// (a small frontier heap of slots), lowering a bound from +∞ to each visited timer's
/// window end, and stops at the first deadline past the bound. Every visited timer has its
/// deadline at or before the final bound (a later window end cannot be earlier than an
/// earlier deadline), so the walk visits exactly the group, ends with bound = L, and the
/// last deadline it visited is A. The result is cached: inserting a timer updates L and A
/// in O(1) unless the timer lowers L below A, and removing one leaves them alone unless it
/// was in the group and was the timer at A or at L; only then does the next call walk.
/// With 10,000 timers an hour away and nothing changing, asking costs one comparison.
///
/// A walk stops after `walkLimit` timers. Stopped early, it returns the last deadline it
/// visited, w, cached as approximate until the next insertion or removal: w is a safe instant to arm at (w ≤ A, so nobody fires
/// late; w is a visited timer's deadline, so that wakeup fires at least the `walkLimit`
/// timers visited). So a pass of the event thread never costs more than
/// O(walkLimit · log walkLimit) here, even while timers keep arriving in a dense group that
/// has not fired yet (100,000 `dispatch_after`s within 50 ms re-dirty the cache again and
/// again), and a group larger than the limit fires in chunks of at least `walkLimit`
/// timers per wakeup rather than in one.
/// Rejected: a second heap ordered by window end (what this heap had before) gives L in
/// O(1) but doubles the sifting of every insert and fire, which with 100,000 timers was
/// the largest part of the event thread's time.
///
/// Insert, remove and pop are O(log n); each node records its slot, so a re-armed or
/// cancelled timer is removed in place. A timer that is already due when the event thread
/// inserts it (the thread fell behind, or the deadline was in the past) skips the heap: it
/// goes into a due batch that `popDue` sorts once and merges with the heap's due timers in
/// deadline order, so it costs no sift up to the root and back down.
///
/// Two heaps, two files. The deadline order itself is `TimerDeadlineHeap`
/// (TimerDeadlineHeap.swift): storage that knows nothing of leeway or wakeups. This file is
/// the policy on top of it (A and L, the cache, the due batch). The walk's frontier is a
/// third, small heap of slots that only `wakeupInstant()` uses, so it stays here.
///
/// Owned by the event thread: nothing else reads or writes a `TimerHeap`. The heap holds
/// one strong reference to each node in it (taken by `insert`, given up by `remove` and
/// `popDue`), kept unmanaged so that sifting moves plain words; a heap dropped with timers
/// still in it leaks them (the event loop's heaps live as long as the process; tests
/// drop a few).
struct TimerHeap {
    private var entries = TimerDeadlineHeap()
    private var nextSequence: UInt64 = 0
    /// A and L, when `wakeupIsCurrent`.
    private var cachedWakeup: UInt64 = 0
    private var cachedBound: UInt64 = 0
    /// False when an insertion or removal may have changed A or L in a way the O(1)
    /// update cannot follow. True for an empty heap.
    private var wakeupIsCurrent = true
    /// The cached A is a stopped walk's safe instant, not A: any change walks again.
    private var wakeupIsApproximate = false
    /// The walk's frontier: a binary min-heap of slots by deadline, kept between walks to
    /// avoid an allocation per walk.
    private var frontier = ContiguousArray<Int>()
    /// Timers that were due when inserted, not in `entries`; sorted earliest-last by the
    /// first `popDue`, which empties it (anything not due at that `now`, possible only if
    /// the wall clock went back, moves into the heap). Their nodes have slot
    /// `TimerNode.inDueBatch`.
    private var dueBatch = ContiguousArray<TimerHeapEntry>()
    private var dueBatchIsSorted = true
    /// How many walks `wakeupInstant()` made (for tests of the cache).
    private(set) var walks = 0
    /// Whether the last `wakeupInstant()` was A itself, not a stopped walk's safe instant.
    var wakeupIsExact: Bool { !wakeupIsApproximate }
    /// The most timers one walk visits (see the type's comment).
    static let walkLimit = 128

    var count: Int { entries.count + dueBatch.count }
    var isEmpty: Bool { entries.count == 0 && dueBatch.isEmpty }

    /// The smallest deadline in the heap (the due batch aside).
    var earliestDeadline: UInt64? { entries.count > 0 ? entries[0].deadline : nil }

    /// L: the smallest `deadline + leeway`, nil when there is no timer. (After a walk that
    /// stopped early: an upper bound of L, for tests.)
    mutating func windowEnd() -> UInt64? {
        guard wakeupInstant() != nil else { return nil }
        return cachedBound
    }

    /// A: the instant the clock's timerfd should expire, nil when there is no timer.
    mutating func wakeupInstant() -> UInt64? {
        if !dueBatch.isEmpty {
            // Due already (the event loop pops them before it asks): wake at once.
            return dueBatch.lazy.map(\.deadline).min()
        }
        if entries.count == 0 { return nil }
        if wakeupIsCurrent { return cachedWakeup }
        walks += 1
        var bound = UInt64.max
        var wakeup: UInt64 = 0
        frontier.removeAll(keepingCapacity: true)
        frontier.append(0)
        let count = entries.count
        var visits = 0
        while !frontier.isEmpty {
            if visits == TimerHeap.walkLimit {
                cachedWakeup = wakeup  // a safe instant, not A
                cachedBound = bound
                wakeupIsCurrent = true
                wakeupIsApproximate = true
                return wakeup
            }
            visits += 1
            let slot = popFrontier()
            let entry = entries[slot]
            if entry.deadline > bound { break }  // and every timer not visited yet
            wakeup = entry.deadline               // visited in deadline order
            if entry.latest < bound { bound = entry.latest }
            var child = TimerDeadlineHeap.firstChild(of: slot)
            let end = min(child &+ 4, count)
            while child < end {
                if entries[child].deadline <= bound { pushFrontier(child) }
                child &+= 1
            }
        }
        cachedWakeup = wakeup
        cachedBound = bound
        wakeupIsCurrent = true
        wakeupIsApproximate = false
        return wakeup
    }

    /// Inserts `node` at the arm `deadline`, `latest` (the window end: deadline + leeway,
    /// see `TimerNode.latest`). `now`, the clock as the caller will next pass it to
    /// `popDue`, lets a timer that is already due skip the heap.
    mutating func insert(_ node: TimerNode, deadline: UInt64, latest: UInt64, now: UInt64? = nil) {
        precondition(node.deadlineSlot == TimerNode.notInHeap, "timer inserted twice")
        let sequence = nextSequence
        nextSequence &+= 1
        // The heap's strong reference, released when the node leaves (remove, popDue).
        _ = Unmanaged.passRetained(node)
        let entry = TimerHeapEntry(node, deadline: deadline, latest: latest, sequence: sequence)
        if let now, deadline <= now {
            dueBatch.append(entry)
            dueBatchIsSorted = false
            node.deadlineSlot = TimerNode.inDueBatch
            return
        }
        let wasEmpty = entries.count == 0
        entries.insert(entry)
        if wasEmpty {
            cachedWakeup = deadline  // a lone timer: A is its deadline
            cachedBound = latest
            wakeupIsCurrent = true
            wakeupIsApproximate = false
            return
        }
        guard wakeupIsCurrent && !wakeupIsApproximate else {
            wakeupIsCurrent = false
            return
        }
        if deadline > cachedBound {
            return  // after the group: neither L nor A moves
        }
        if latest >= cachedBound {
            // L stays; the node joins the group.
            if deadline > cachedWakeup { cachedWakeup = deadline }
        } else if cachedWakeup <= latest {
            // L drops to latest but not below A: the timer at A stays in the group,
            // which loses only deadlines above the new L (none are above A), and gains
            // the node (its deadline is at most its latest).
            cachedBound = latest
            if deadline > cachedWakeup { cachedWakeup = deadline }
        } else {
            wakeupIsCurrent = false
        }
    }

    /// Removes `node` if it is in the heap; returns whether it was.
    @discardableResult
    mutating func remove(_ node: TimerNode) -> Bool {
        if node.deadlineSlot == TimerNode.inDueBatch {
            // Rare: the batch lives for one pass. Order is restored by the next sort.
            let index = dueBatch.firstIndex { $0.node.toOpaque() == Unmanaged.passUnretained(node).toOpaque() }!
            dueBatch.swapAt(index, dueBatch.count - 1)
            dueBatch.removeLast()
            dueBatchIsSorted = false
            node.deadlineSlot = TimerNode.notInHeap
            Unmanaged.passUnretained(node).release()
            return true
        }
        guard node.deadlineSlot >= 0 else { return false }
        noteRemoval(of: entries.remove(node))
        Unmanaged.passUnretained(node).release()  // the caller still holds one
        return true
    }

    /// Removes and returns the timer with the earliest deadline if that deadline is at or
    /// before `now`.
    mutating func popDue(now: UInt64) -> TimerNode? {
        if !dueBatch.isEmpty {
            if !dueBatchIsSorted {
                dueBatch.sort { $1.precedes($0) }  // earliest last
                dueBatchIsSorted = true
            }
            let first = dueBatch[dueBatch.count - 1]
            if first.deadline <= now && (entries.count == 0 || first.precedes(entries[0])) {
                dueBatch.removeLast()
                let node = first.node.takeUnretainedValue()
                node.deadlineSlot = TimerNode.notInHeap
                first.node.release()  // `node` is the caller's reference now
                return node
            }
        }
        guard entries.count > 0, entries[0].deadline <= now else {
            flushDueBatch()
            return nil
        }
        let top = entries[0].node.takeUnretainedValue()
        noteRemoval(of: entries.remove(top))
        Unmanaged.passUnretained(top).release()  // `top` is the caller's reference now
        return top
    }

    /// Moves what is left in the due batch (timers not due at the `now` of the last
    /// `popDue`: the wall clock went back) into the heap.
    private mutating func flushDueBatch() {
        while let entry = dueBatch.popLast() {
            let node = entry.node.takeUnretainedValue()
            node.deadlineSlot = TimerNode.notInHeap
            entry.node.release()
            insert(node, deadline: entry.deadline, latest: entry.latest)
        }
        dueBatchIsSorted = true
    }

    /// Keeps the cached A and L after a removal: unchanged when the node was not in the
    /// group, or was in it but neither at A nor at L (a deadline below A, a window end
    /// after L; a timer outside the group has its window end after L).
    private mutating func noteRemoval(of removed: TimerHeapEntry) {
        guard entries.count > 0 else { return }  // empty: nil whatever the cache says
        guard wakeupIsCurrent && !wakeupIsApproximate else {
            wakeupIsCurrent = false
            return
        }
        if removed.deadline > cachedBound { return }
        if removed.latest > cachedBound && removed.deadline < cachedWakeup { return }
        wakeupIsCurrent = false
    }

    // The frontier: a binary min-heap of slots ordered by their entries' deadlines.

    private mutating func pushFrontier(_ slot: Int) {
        frontier.append(slot)
        var child = frontier.count - 1
        let key = entries[slot].deadline
        while child > 0 {
            let parent = (child - 1) / 2
            guard key < entries[frontier[parent]].deadline else { break }
            frontier[child] = frontier[parent]
            child = parent
        }
        frontier[child] = slot
    }

    private mutating func popFrontier() -> Int {
        let top = frontier[0]
        let last = frontier.removeLast()
        if frontier.isEmpty { return top }
        let key = entries[last].deadline
        var parent = 0
        let count = frontier.count
        while true {
            var child = 2 * parent + 1
            if child >= count { break }
            if child + 1 < count && entries[frontier[child + 1]].deadline < entries[frontier[child]].deadline {
                child += 1
            }
            guard entries[frontier[child]].deadline < key else { break }
            frontier[parent] = frontier[child]
            parent = child
        }
        frontier[parent] = last
        return top
    }
}

extension TimerHeap {
    /// For tests: inserts a node made with `TimerNode(clock:deadline:leeway:fire:context:)`
    /// at the arm in its request (read without the node's lock: tests own their nodes).
    mutating func insert(_ node: TimerNode, now: UInt64? = nil) {
        insert(node, deadline: node.request.deadline, latest: node.request.latest, now: now)
    }

    /// Debug check of the heap (for tests).
    func checkInvariants() -> Bool {
        entries.checkInvariants() && dueBatch.allSatisfy { $0.node.takeUnretainedValue().deadlineSlot == TimerNode.inDueBatch }
    }

    /// (A, L) by brute force over every timer (for tests of `wakeupInstant()`).
    func wakeupByBruteForce() -> (wakeup: UInt64, bound: UInt64)? {
        guard entries.count > 0 else { return nil }
        let all = (0..<entries.count).map { entries[$0] }
        let bound = all.map(\.latest).min()!
        return (all.map(\.deadline).filter { $0 <= bound }.max()!, bound)
    }
}
