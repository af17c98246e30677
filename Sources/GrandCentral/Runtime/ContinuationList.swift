import CGrandCentral
import Glibc
import Synchronization

/// An intrusive multi-producer, single-consumer list of continuations: the item list of
/// every queue.
///
/// Protocol (libdispatch's os_mpsc): a producer links its node with one atomic exchange of
/// `tail`, then publishes it through the previous node's `next`, or through `head` when the
/// list was empty. `push` reports that empty → non-empty transition so the caller can wake
/// the queue up. Only the thread that owns the queue's drain calls `pop`. A consumer that
/// finds a node whose successor is not yet linked (a producer between its exchange and its
/// store) spins for the few instructions that takes.
///
/// The rejected alternative, Vyukov's list with a stub node, needs no `head` store by
/// producers but costs a 64-byte stub per queue; idle queues must stay small.
/// A producer is between its exchange and its link store: usually a few instructions, but
/// it may have been preempted (2 cores, more runnable threads), so after a short spin
/// give it the CPU.
@inline(never)
func waitForProducer(_ spins: inout Int) {
    spins += 1
    if spins < 64 { gc_cpu_relax() } else { sched_yield() }
}

/// The consumer's half of the protocol (below), on a list's `head` and `tail` wherever they
/// live (`ContinuationList`, and `RootQueue`, which keeps them on separate cache lines):
/// removes the first node. One consumer at a time: the drain owner, or the holder of a
/// root's pop lock.
@inline(__always)
func popFirstNode(head: borrowing Atomic<UInt>, tail: borrowing Atomic<UInt>) -> Continuation? {
    var first = head.load(ordering: .acquiring)
    if first == 0 {
        if tail.load(ordering: .sequentiallyConsistent) == 0 { return nil }
        // A producer exchanged tail but has not stored head yet.
        var spins = 0
        repeat {
            waitForProducer(&spins)
            first = head.load(ordering: .acquiring)
        } while first == 0
    }
    let node = Continuation(bitPattern: first)!
    if let next = gc_continuation_load_next(node) {
        head.store(UInt(bitPattern: next), ordering: .relaxed)
        return node
    }
    head.store(0, ordering: .relaxed)
    if tail.compareExchange(expected: first, desired: 0, ordering: .sequentiallyConsistent).exchanged {
        return node
    }
    // A producer linked a successor after `node`; wait for its store.
    var next = gc_continuation_load_next(node)
    var spins = 0
    while next == nil {
        waitForProducer(&spins)
        next = gc_continuation_load_next(node)
    }
    head.store(UInt(bitPattern: next!), ordering: .relaxed)
    return node
}

struct ContinuationList: ~Copyable {
    /// The first node; written by the producer that found the list empty and by the consumer.
    private let head = Atomic<UInt>(0)
    /// The last node, or 0 when the list is empty. Every producer exchanges it.
    private let tail = Atomic<UInt>(0)

    init() {}

    /// The child of a fork (Runtime/Fork.swift): the nodes are the parent's work; forget
    /// them (never run, never freed). Single-threaded: the child has one thread.
    func forgetInForkChild() {
        head.store(0, ordering: .relaxed)
        tail.store(0, ordering: .relaxed)
    }

    /// Appends `node`; returns true when the list was empty before (the caller must wake
    /// the queue up).
    @inline(__always)
    func push(_ node: Continuation) -> Bool {
        push(first: node, last: node)
    }

    /// Appends the chain `first … last` (already linked through `next`); returns true when
    /// the list was empty before.
    @inline(__always)
    func push(first: Continuation, last: Continuation) -> Bool {
        last.pointee.next = nil
        // sequentiallyConsistent: a producer's exchange must be ordered before its read of
        // the queue state, against a drainer's state store then emptiness check (Dekker).
        let previous = tail.exchange(UInt(bitPattern: last), ordering: .sequentiallyConsistent)
        if previous == 0 {
            head.store(UInt(bitPattern: first), ordering: .releasing)
            return true
        }
        gc_continuation_store_next(Continuation(bitPattern: previous)!, first)
        return false
    }

    /// True when no node is linked (a push may be in progress).
    @inline(__always)
    var isEmpty: Bool { tail.load(ordering: .sequentiallyConsistent) == 0 }

    /// The last node linked so far (0 when empty), for a drain that stops at what was there
    /// when it began (`MainQueueDriver.runLoopDrain`). Only compared, never dereferenced.
    @inline(__always)
    var lastNode: UInt { tail.load(ordering: .sequentiallyConsistent) }

    /// Removes the first node. Only the drain owner calls this.
    @inline(__always)
    func pop() -> Continuation? { popFirstNode(head: head, tail: tail) }
}
