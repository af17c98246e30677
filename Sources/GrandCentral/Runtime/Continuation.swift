import CGrandCentral
import Glibc

/// A work item in flight: a `gc_continuation_t` (CGrandCentral.h), 64 bytes.
typealias Continuation = UnsafeMutablePointer<gc_continuation_t>

/// What a continuation is, in its `flags` word. Written by the submitter before the node
/// is published; read by the thread that runs it.
struct ContinuationFlags: OptionSet {
    let rawValue: UInt
    /// Runs alone on its (concurrent) queue: after everything before it, before everything after it.
    static let barrier = ContinuationFlags(rawValue: 1 << 0)
    /// A `dispatch_sync` onto a queue whose work runs on the main thread: the drainer runs
    /// the function, then wakes the waiter parked on `waiter_word`; a drainer that is not
    /// running the main queue's work (the queue was retargeted off it meanwhile) lends the
    /// caller its levels instead (`SyncLoan`). The node lives on the waiter's stack: never
    /// recycled.
    static let syncWaiter = ContinuationFlags(rawValue: 1 << 1)
    /// `context` is a queue whose drain this node schedules (a queue's wakeup on its target).
    static let drainQueue = ContinuationFlags(rawValue: 1 << 2)
    /// `group` is a DispatchGroup to leave after the function returns. Unretained: the
    /// submitter entered the group first, and a group holds a reference to itself while
    /// its count is non-zero.
    static let groupMember = ContinuationFlags(rawValue: 1 << 3)
    /// `owner` is a concurrent queue whose width this item holds while it runs. Unretained:
    /// a concurrent queue holds a reference to itself while it has width in use.
    static let redirected = ContinuationFlags(rawValue: 1 << 4)
    /// A `dispatch_sync` caller parked on `waiter_word`, waiting for its turn on the queue.
    /// The drain never runs it: it hands the caller the queue (the drain lock when the node
    /// is also a barrier, else one unit of width) and wakes it (see QueueSync.swift). The
    /// node lives on the caller's stack: never recycled.
    static let syncHandoff = ContinuationFlags(rawValue: 1 << 5)
}

/// The per-thread continuation cache. A thread takes nodes from its own cache and returns
/// nodes it ran to its own cache. Only the owning thread touches its cache
/// (`gc_thread_t.cache`, CGrandCentral.h).
///
/// Work usually flows one way — a producer thread allocates, a worker frees — so the
/// caches alone would send every node to a new slab on one side and back to its slab on
/// the other. A full cache therefore hands its nodes to the `ContinuationDepot` as one
/// batch, and an empty cache takes a batch from there before it makes a slab: nodes
/// circulate between threads in batches of `limit`, one lock round trip per batch.
enum ContinuationCache {
    static let limit: UInt32 = 256

    @inline(__always)
    static func allocate() -> Continuation {
        let thread = gc_thread_self()!
        if let node = thread.pointee.cache {
            let next = node.pointee.next
            thread.pointee.cache = next
            thread.pointee.cache_count &-= 1
            // The next node's line, for the next allocation's writes: a node recycled by
            // another thread (a worker) is in that thread's cache, and a producer that
            // missed on every node it filled in paid for it at its next atomic (a locked
            // instruction waits for the stores before it).
            if let next { gc_prefetch_for_write(next) }
            return node
        }
        return allocateSlow(thread)
    }

    @inline(never)
    static func allocateSlow(_ thread: UnsafeMutablePointer<gc_thread_t>) -> Continuation {
        gc_thread_register_cache_cleanup()
        if let batch = ContinuationDepot.shared.take() {
            thread.pointee.cache = batch.pointee.next
            thread.pointee.cache_count = limit - 1
            return batch
        }
        // The depot is empty (a backlog is growing: nodes go out faster than they come
        // back): fill the cache from a new slab (CGrandCentral.h), whose nodes come linked
        // in address order, so a backlog built from them is drained front to back through
        // memory, which the hardware prefetcher follows.
        let first = gc_continuation_slab_new()!
        thread.pointee.cache = first.pointee.next
        thread.pointee.cache_count = UInt32(GC_CONTINUATION_SLAB_NODES) - 1
        return first
    }

    @inline(__always)
    static func recycle(_ node: Continuation) {
        let thread = gc_thread_self()!
        if thread.pointee.cache_count >= limit { recycleSlow(thread) }
        node.pointee.next = thread.pointee.cache
        thread.pointee.cache = node
        thread.pointee.cache_count &+= 1
    }

    /// The cache is full: hand it to the depot whole.
    @inline(never)
    static func recycleSlow(_ thread: UnsafeMutablePointer<gc_thread_t>) {
        gc_thread_register_cache_cleanup()
        ContinuationDepot.shared.give(thread.pointee.cache!)
        thread.pointee.cache = nil
        thread.pointee.cache_count = 0
    }

    /// Makes a node for `function(context)`.
    @inline(__always)
    static func make(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                     _ flags: ContinuationFlags = []) -> Continuation {
        let node = allocate()
        node.pointee.next = nil
        node.pointee.function = function
        node.pointee.context = context
        node.pointee.flags = flags.rawValue
        node.pointee.group = nil
        node.pointee.owner = nil
        node.pointee.slot.after_queue = nil
        node.pointee.waiter_word = 0
        return node
    }
}

/// Full batches of `ContinuationCache.limit` free continuations, shared by all threads.
/// A batch is a chain through `next`; batches are chained through their first node's
/// `slot.next_batch`. Guarded by `lock`. At most `maximumBatches` are kept; beyond that a
/// batch's nodes go back to their slabs (`gc_continuation_release`), and a slab whose
/// nodes have all come back goes back to malloc.
///
/// Why 8 batches (2,048 nodes): a kept node holds its whole 4 KiB slab, and nodes come back
/// in an order that skips across slabs when a burst is drained queue by queue. With 64
/// batches, 10^6 items round-robin over 64 suspended queues left 63-65 MB in use after they
/// ran (16,384 kept nodes, nearly one slab each) and the next burst carved new slabs
/// (pending 127 MB; libdispatch 83-85 MB). With 8: 5-10 MB after over 8 rounds, RSS 12-18 MB
/// (libdispatch 14 MB), pending 70-74 MB; the suspended-queue backlog rows stay at 0.70 /
/// 0.59 of libdispatch's time (load 56). ctests/queues: the round-robin section.
final class ContinuationDepot: @unchecked Sendable {
    static let shared = ContinuationDepot()
    static let maximumBatches = 8

    private let lock = SpinLock()
    private var batches: Continuation?
    private var count = 0

    func give(_ batch: Continuation) {
        let kept: Bool = lock.withLock {
            if count >= Self.maximumBatches { return false }
            batch.pointee.slot.next_batch = batches
            batches = batch
            count += 1
            return true
        }
        if !kept { gc_continuation_release(batch) }
    }

    func take() -> Continuation? {
        lock.withLock {
            guard let batch = batches else { return nil }
            batches = batch.pointee.slot.next_batch
            count -= 1
            return batch
        }
    }

    /// The child of a fork (Runtime/Fork.swift): a parent thread may have held the lock, or
    /// been between its two stores, at the fork; the child forgets the kept batches (never
    /// freed: the parent's nodes) and starts with an unlocked, empty depot. Stores only.
    func forgetInForkChild() {
        lock.resetInForkChild()
        batches = nil
        count = 0
    }
}

/// A Swift closure travelling through the C-shaped machinery: retained into `context`
/// when submitted, released after it ran.
final class ClosureBox {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// The trampoline that runs a `ClosureBox` context.
let closureBoxTrampoline: DispatchFunction = { context in
    let box = Unmanaged<ClosureBox>.fromOpaque(context!).takeRetainedValue()
    box.body()
}

extension ClosureBox {
    /// Retains `body` into a context pointer for `closureBoxTrampoline`.
    static func retainedContext(_ body: @escaping () -> Void) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(ClosureBox(body)).toOpaque()
    }
}
