import CGrandCentral
import Synchronization

/// The root queues: one per QoS bucket, each in an overcommit and a non-overcommit
/// flavour, all served by the one thread pool. A worker takes work from the highest QoS
/// bucket that has any (overcommit before non-overcommit within a bucket).
///
/// Which root a queue targets, as in libdispatch: serial queues (`dispatch_queue_create`
/// with a serial or NULL attribute) and the main queue target the overcommit root of their
/// QoS; concurrent queues and `dispatch_get_global_queue(qos, 0)` the non-overcommit one;
/// `DISPATCH_QUEUE_OVERCOMMIT` (decoded by the C ABI into `overcommit`) and
/// `dispatch_queue_attr_make_with_overcommit` choose explicitly. The two flavours differ only in how the pool gives them threads
/// (see `ThreadPool`): an overcommit root's waiting item gets a thread of its own within
/// milliseconds whenever no worker is idle; a non-overcommit root keeps about one running
/// thread per CPU.
enum RootQueues {
    static let bucketCount = 6

    /// Index = bucket * 2 + (overcommit ? 1 : 0).
    static let all: [RootQueue] = {
        var queues: [RootQueue] = []
        let names = ["maintenance", "background", "utility", "default", "user-initiated", "user-interactive"]
        for bucket in 0..<bucketCount {
            for overcommit in [false, true] {
                var attributes = QueueAttributes.concurrent
                attributes.qos = QoSLevel.byBucket[bucket]
                let label = "com.apple.root.\(names[bucket])-qos" + (overcommit ? ".overcommit" : "")
                let queue = label.withCString {
                    RootQueue(overcommit: overcommit, label: $0, attributes: attributes)
                }
                queues.append(queue)
            }
        }
        return queues
    }()

    /// The pool scans in this order: highest QoS first, overcommit first. Unmanaged, so a
    /// scan costs no reference counting (the root queues live forever).
    nonisolated(unsafe) static let scanOrder: UnsafeMutableBufferPointer<Unmanaged<RootQueue>> = {
        let buffer = UnsafeMutableBufferPointer<Unmanaged<RootQueue>>.allocate(capacity: all.count)
        for (i, queue) in all.reversed().enumerated() { buffer[i] = Unmanaged.passUnretained(queue) }
        return buffer
    }()

    /// The overcommit roots alone, for the starvation monitor.
    nonisolated(unsafe) static let overcommitRoots: UnsafeMutableBufferPointer<Unmanaged<RootQueue>> = {
        let roots = all.filter { $0.overcommit }
        let buffer = UnsafeMutableBufferPointer<Unmanaged<RootQueue>>.allocate(capacity: roots.count)
        for (i, queue) in roots.enumerated() { buffer[i] = Unmanaged.passUnretained(queue) }
        return buffer
    }()

    /// The non-overcommit roots alone, for the starvation monitor.
    nonisolated(unsafe) static let constrainedRoots: UnsafeMutableBufferPointer<Unmanaged<RootQueue>> = {
        let roots = all.filter { !$0.overcommit }
        let buffer = UnsafeMutableBufferPointer<Unmanaged<RootQueue>>.allocate(capacity: roots.count)
        for (i, queue) in roots.enumerated() { buffer[i] = Unmanaged.passUnretained(queue) }
        return buffer
    }()

    @inline(__always)
    static func queue(qos: QoSLevel, overcommit: Bool) -> DispatchQueue {
        all[qos.bucket * 2 + (overcommit ? 1 : 0)]
    }

    static let defaultQueue: DispatchQueue = queue(qos: .default, overcommit: false)

    /// `dispatch_get_global_queue`'s identifier: a QoS class or a legacy priority; nil for
    /// any other value.
    static func queue(identifier: Int, overcommit: Bool) -> DispatchQueue? {
        let qos: QoSLevel
        switch identifier {
        case 2: qos = .userInitiated                     // DISPATCH_QUEUE_PRIORITY_HIGH
        case 0: qos = .default                           // DISPATCH_QUEUE_PRIORITY_DEFAULT
        case -2: qos = .utility                          // DISPATCH_QUEUE_PRIORITY_LOW
        case Int(Int16.min): qos = .background           // DISPATCH_QUEUE_PRIORITY_BACKGROUND
        default:
            guard identifier >= 0, identifier <= Int(UInt32.max),
                  let q = QoSLevel(rawValue: UInt32(identifier)) else { return nil }
            qos = q
        }
        return queue(qos: qos, overcommit: overcommit)
    }

    /// Items waiting on the overcommit roots (pushed and not yet popped). Approximate
    /// while producers and workers are at it; exact when they are not.
    static func overcommitPending() -> Int {
        var total = 0
        for root in overcommitRoots { total += root._withUnsafeGuaranteedRef { $0.pendingCount } }
        return total
    }

    /// Items ever popped from the overcommit roots: the monitor's measure of whether they
    /// are being served.
    static func overcommitPops() -> UInt64 {
        var total: UInt64 = 0
        for root in overcommitRoots { total &+= root._withUnsafeGuaranteedRef { $0.pops.load(ordering: .relaxed) } }
        return total
    }

    /// True when a non-overcommit root has an item waiting.
    static func constrainedHasWork() -> Bool {
        for root in constrainedRoots where !root._withUnsafeGuaranteedRef({ $0.isEmptyRoot }) { return true }
        return false
    }
}

/// A root queue: its items are popped by the pool's workers directly (it has no target).
///
/// Its item list is its own, not the `items` every other queue has (which a root leaves
/// empty): the same protocol as `ContinuationList` (producers link with one exchange of
/// `tail`; one consumer at a time pops, here whoever holds `popLock`), but laid out so that
/// the two sides do not share a cache line. A root is fed by threads that are not its
/// consumers (the fan-out row: the main thread pushes, two workers pop), and with `head`,
/// `tail`, the pop lock, `pops` and the `overcommit` flag the producer reads within one or
/// two lines, every pop took the line away from the producer and every push took it back
/// (in the fan-out row's profile the instructions after the producer's exchange of `tail`
/// and its load of `overcommit` held 45% of `dispatch_group_async_f`'s samples, though a
/// locked instruction also waits for the stores before it). So:
/// - the producer's line: `tail` and `pushes`, written by producers (and by the consumer
///   only when it empties the list);
/// - the consumer's line: `head`, `popLock`, `pops`, written by the lock holder (and by a
///   producer only when it finds the list empty);
/// - `overcommit` and the inherited fields, read by both and written by neither;
/// with at least a line of padding between the groups (objects are 16-byte aligned, so
/// padding, not alignment, keeps them apart). A consumer asking "is there work?" reads
/// `head` first: while the list is non-empty that is its own line, and it reads `tail` (the
/// producer's) only to tell empty from a push in progress.
///
/// Counters:
/// - `pushes`, overcommit roots only: items ever pushed. Any producer adds 1 (relaxed RMW)
///   before linking its item, so `pushes - pops` never undercounts what is linked. (The
///   pool's policy needs to know how many overcommit items wait; the non-overcommit roots'
///   hot path, `dispatch_async` onto a global queue, pays no RMW for it.)
/// - `pops`, every root: items ever popped. Written only by the worker holding `popLock`
///   (a plain load and store, no RMW, on the line the lock just brought in), read by the
///   monitor, which tells from it whether a root is served at all (overcommit starvation,
///   and a root left waiting behind higher-QoS roots). Relaxed: the monitor wants an
///   estimate and a change to compare, never a happens-before edge.
final class RootQueue: DispatchQueue, @unchecked Sendable {
    let overcommit: Bool
    private let padBeforeTail = CacheLinePadding()
    /// The last node, or 0 when the list is empty. Every producer exchanges it.
    private let tail = Atomic<UInt>(0)
    let pushes = Atomic<UInt64>(0)
    private let padBeforeHead = CacheLinePadding()
    /// The first node; written by the `popLock` holder and by the producer that found the
    /// list empty.
    private let head = Atomic<UInt>(0)
    /// Serializes consumers: the list is multi-producer, single-consumer.
    private let popLock = Atomic<Bool>(false)
    let pops = Atomic<UInt64>(0)
    private let padAfterHead = CacheLinePadding()

    init(overcommit: Bool, label: UnsafePointer<CChar>?, attributes: QueueAttributes) {
        self.overcommit = overcommit
        super.init(role: .root, label: label, attributes: attributes, target: nil)
    }

    var pendingCount: Int {
        let popped = pops.load(ordering: .relaxed)
        let pushed = pushes.load(ordering: .relaxed)
        return pushed > popped ? Int(pushed &- popped) : 0
    }

    /// True when no item is linked (a push may be in progress). A non-zero `head` is a
    /// linked item; only when it is 0 is `tail` read, sequentially consistent: "empty" is
    /// the answer the Dekker pairs need ordered (a worker announcing itself idle or leaving
    /// the spinners, then looking, against a producer's exchange of `tail`, then its look
    /// at `idle`/`spinning`); "not empty" only sends the caller to `popRoot`, which looks
    /// again under the lock.
    @inline(__always)
    var isEmptyRoot: Bool {
        head.load(ordering: .relaxed) == 0 && tail.load(ordering: .sequentiallyConsistent) == 0
    }

    /// `DispatchQueue.push` on a root: count the item, then link it and, when the root was
    /// empty, wake a worker (a root that was already non-empty has a worker on its way:
    /// workers that take an item wake a peer while items remain, see `Worker.run`).
    @inline(__always)
    func pushRoot(_ node: Continuation) {
        if overcommit { pushes.wrappingAdd(1, ordering: .relaxed) }
        node.pointee.next = nil
        // sequentiallyConsistent: the exchange, then the look at `spinning`/`idle` in
        // `workAvailable` (Dekker with a worker's announce-then-look).
        let previous = tail.exchange(UInt(bitPattern: node), ordering: .sequentiallyConsistent)
        if previous == 0 {
            head.store(UInt(bitPattern: node), ordering: .releasing)
            ThreadPool.shared.workAvailable()
            return
        }
        gc_continuation_store_next(Continuation(bitPattern: previous)!, node)
    }

    /// The consumer side: pops under `popLock` (many workers consume).
    @inline(__always)
    func popRoot() -> Continuation? {
        if isEmptyRoot { return nil }
        if popLock.exchange(true, ordering: .acquiring) { return popRootContended() }
        let node = popLocked()
        popLock.store(false, ordering: .releasing)
        return node
    }

    @inline(never)
    func popRootContended() -> Continuation? {
        var spins = 0
        while true {
            if isEmptyRoot { return nil }
            if !popLock.load(ordering: .relaxed) && !popLock.exchange(true, ordering: .acquiring) {
                let node = popLocked()
                popLock.store(false, ordering: .releasing)
                return node
            }
            spins += 1
            if spins > 16 { return nil }
            gc_cpu_relax()
        }
    }

    /// Removes the first node (`popFirstNode`, ContinuationList.swift) and counts it. The
    /// caller holds `popLock`.
    @inline(__always)
    private func popLocked() -> Continuation? {
        guard let node = popFirstNode(head: head, tail: tail) else { return nil }
        pops.store(pops.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        return node
    }

    /// The child of a fork (Runtime/Fork.swift): the nodes are the parent's work; forget
    /// them. Single-threaded.
    func forgetInForkChild() {
        head.store(0, ordering: .relaxed)
        tail.store(0, ordering: .relaxed)
        popLock.store(false, ordering: .relaxed)
    }
}

/// 64 bytes that keep the fields before them off the cache line of the fields after them.
struct CacheLinePadding {
    private let words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
}

extension DispatchQueue {
    static var defaultRootQueue: DispatchQueue { RootQueues.defaultQueue }
}
