import CGrandCentral
import Glibc
import Synchronization

/// A dispatch queue: serial, concurrent, a root queue of the thread pool, or the main queue.
///
/// Items live in an intrusive MPSC list (`items`); the state word (`state`, see
/// `QueueState`) says who owns the drain. A producer pushes with one atomic exchange; the
/// producer that makes an idle queue non-empty sets ENQUEUED and schedules one drain of the
/// queue on its target (a node on the target's list), so a busy queue costs its target one
/// node however many items it has. Only the drain owner pops.
///
/// Who may touch what:
/// - `state`, `items`, `pendingHead`, `width`, `targetBits`: atomics, any thread.
/// - `ownedLabel`, `role`: immutable after init.
/// - `qosLevel`, `relativePriority`: written only while the queue is inactive
///   (dispatch_set_qos_class and friends), by the client that created it, before anyone
///   else can see the queue's work; read-only afterwards.
/// - `borrowedLabel`: atomic; set by dispatch_queue_set_label_nocopy on a queue created
///   without a label (its storage is the caller's, never freed here).
/// - `specifics`, `retiredTargets`: guarded by `specificsLock`.
public class DispatchQueue: DispatchObject, @unchecked Sendable {
    /// What drains this queue and where its work goes.
    enum Role: UInt8 {
        /// An ordinary queue with width 1, or more after `dispatch_queue_set_width`.
        case serial
        /// An ordinary queue created concurrent.
        case concurrent
        /// A root queue: the pool's workers pop it directly; it has no target.
        case root
        /// The main queue: drained by the main thread in `dispatch_main`.
        case main
        /// A run loop's thread-bound queue (`RunLoopQueue`): drained one item at a time by
        /// the thread that runs the loop.
        case runloop
    }

    let role: Role
    let state: Atomic<UInt64>
    let items = ContinuationList()
    /// An item taken off `items` but not started yet, which the next drain must take before
    /// the list's head. Concurrent queues: the head a drain could not start (a barrier
    /// waiting for in-flight items, or any item when the width is used up), written by the
    /// drain owner before it sets DRAIN_WAITING. Serial queues: the item a releasing sync
    /// caller popped while looking for a waiting sync caller to hand the queue to
    /// (`syncRelease`), or a width waiter met by a serial drain that switches to concurrent
    /// mode. Only the holder of the drain lock (ENQUEUED) writes it or takes the item, and
    /// it is non-zero only while the lock is held, so the lock's hand-over orders those
    /// accesses; `wakeup`, `tryUnlockDrain` and the sync fast path only test it for zero.
    let pendingHead = Atomic<UInt>(0)
    /// How many items may run at once: 1 for serial queues. Changed only by a barrier
    /// (`setWidth`), so it never changes with items in flight.
    let width: Atomic<UInt32>
    /// The drain dispatches through `inFlight` (drainConcurrent) rather than running items
    /// inline (drainSerial). Set for concurrent queues, and for good once a serial queue's
    /// width is changed: a drain mode switch with items in flight would break exclusion.
    let usesWidth: Atomic<Bool>
    /// The target queue, as an unmanaged retained reference (0 for root queues). Replaced
    /// targets are parked in `retiredTargets` until deinit, because another thread may be
    /// pushing onto the old one.
    let targetBits = Atomic<UInt>(0)
    var retiredTargets: [DispatchQueue] = []
    /// strdup'ed label or nil.
    let ownedLabel: UnsafeMutablePointer<CChar>?
    /// dispatch_queue_set_label_nocopy's label (only when `ownedLabel` is nil), or nil.
    let borrowedLabel = Atomic<UnsafeMutableRawPointer?>(nil)
    var qosLevel: QoSLevel
    var relativePriority: Int32
    /// dispatch_queue_set_specific storage (QueueSpecifics.swift); empty until first use.
    var specifics: [QueueSpecifics.Entry] = []
    let specificsLock = SpinLock()

    static let maximumWidth: UInt32 = 4094

    // MARK: Creation

    init(role: Role, label: UnsafePointer<CChar>?, attributes: QueueAttributes,
         target: DispatchQueue?) {
        self.role = role
        self.ownedLabel = label.flatMap { strdup($0) }
        self.qosLevel = attributes.qos
        self.relativePriority = attributes.relativePriority
        var initial: UInt64 = 0
        if attributes.isInitiallyInactive { initial |= QueueState.inactive }
        self.state = Atomic(initial)
        self.usesWidth = Atomic(role == .concurrent)
        switch role {
        case .serial, .main, .runloop: self.width = Atomic(1)
        case .concurrent: self.width = Atomic(Self.maximumWidth)
        case .root: self.width = Atomic(Self.maximumWidth)
        }
        super.init(kind: .queue, isGlobal: role == .root || role == .main)
        if let target {
            targetBits.store(UInt(bitPattern: Unmanaged.passRetained(target).toOpaque()), ordering: .relaxed)
        }
    }

    /// `dispatch_queue_create_with_target`.
    static func make(label: UnsafePointer<CChar>?, attributes: QueueAttributes, target: DispatchQueue?) -> DispatchQueue {
        let resolvedTarget = target ?? RootQueues.queue(
            qos: attributes.qos, overcommit: attributes.overcommit ?? !attributes.isConcurrent)
        return DispatchQueue(role: attributes.isConcurrent ? .concurrent : .serial, label: label,
                             attributes: attributes, target: resolvedTarget)
    }

    deinit {
        // Acquiring, though the last ARC release already orders every other thread's RMWs
        // of `state` before deinit; only the counts are read.
        let s = QueueState(state.load(ordering: .acquiring))
        if s.isSuspended && !items.isEmpty {
            clientBug("dispatch_release", "a suspended queue with pending work items was released")
        }
        runFinalizer()  // on the target, which must still be alive
        if let target = targetQueue { Unmanaged.passUnretained(target).release() }
        if let ownedLabel {
            ThreadNames.queueWillFree()  // the monitor may be copying it into a thread's name
            free(ownedLabel)
        }
        QueueSpecifics.destroyAll(specifics)
    }

    // MARK: Identity

    /// (`targetBits` is loaded acquiring here and in `unmanagedTarget`: pairs with
    /// setTargetQueue's releasing exchange, so the new target's retain is seen.)
    @inline(__always)
    var targetQueue: DispatchQueue? {
        let bits = targetBits.load(ordering: .acquiring)
        if bits == 0 { return nil }
        return Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue()
    }

    /// The target without a retain (the caller's reference to this queue keeps the
    /// target alive); nil for root queues.
    @inline(__always)
    var unmanagedTarget: Unmanaged<DispatchQueue>? {
        let bits = targetBits.load(ordering: .acquiring)
        if bits == 0 { return nil }
        return Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
    }

    override var finalizerQueue: DispatchQueue? { targetQueue }

    override func externalRefsDidReachZero() { checkReleasable() }

    override func debugDescription() -> String { queueDebugDescription() }

    override func suspendObject() { suspendQueue() }
    override func resumeObject(caller: StaticString) { resumeQueue(caller: caller) }
    override func activateObject() { activateQueue() }
    override func setTargetObject(_ target: DispatchQueue?, caller: StaticString) { setTargetQueue(target, caller: caller) }

    /// The label: the queue's own copy, or the caller's string set by
    /// dispatch_queue_set_label_nocopy; nil when it has none.
    @inline(__always)
    var labelPointer: UnsafeMutablePointer<CChar>? {
        if let ownedLabel { return ownedLabel }
        // Acquiring: the caller's string was written before it was handed over.
        return borrowedLabel.load(ordering: .acquiring)?.assumingMemoryBound(to: CChar.self)
    }

    var labelString: String { labelPointer.map { String(cString: $0) } ?? "" }

    @inline(__always)
    var isSerial: Bool { width.load(ordering: .relaxed) == 1 }

    // MARK: Submitting

    /// `dispatch_async_f`: enqueues `function(context)`.
    @inline(__always)
    final func enqueue(_ function: DispatchFunction, _ context: UnsafeMutableRawPointer?,
                       _ flags: ContinuationFlags = []) {
        push(ContinuationCache.make(function, context, flags))
    }

    /// Adds a continuation and, when that made the queue non-empty, wakes the queue up (a
    /// root queue counts it and wakes a worker: `RootQueue.pushRoot`).
    @inline(__always)
    final func push(_ node: Continuation) {
        if role == .root { return unsafeDowncast(self, to: RootQueue.self).pushRoot(node) }
        if usesWidth.load(ordering: .relaxed),
           node.pointee.flags & Self.heldByDrain == 0,
           tryRedirectAtOnce(node) { return }
        if items.push(node) { wakeup() }
    }

    /// Items a concurrent queue's drain does not simply redirect (it runs a barrier itself
    /// and hands a sync waiter the queue), so they always go through the list.
    static let heldByDrain = ContinuationFlags.barrier.rawValue | ContinuationFlags.syncHandoff.rawValue

    /// The producer's side of a concurrent queue's drain, as libdispatch's concurrent push
    /// does: when the queue is idle (no drain scheduled or running, nothing queued, not
    /// suspended) and has a unit of width free, the item takes the unit and goes straight
    /// to the target, exactly as a drain would redirect it, without a drain node, a trip
    /// through the target for that drain, or a second worker woken for the redirected item
    /// (the Swift global executor's path: one `dispatch_async_f` per job onto a concurrent
    /// queue). FIFO holds: with nothing queued and no drain holding a popped item, every
    /// item submitted before this one has already been redirected; an item being pushed
    /// by another thread right now is concurrent with this one. Returns false (the caller
    /// pushes onto the list) when the queue is not idle or its width is used up. Out of
    /// line: `push` is inlined into every submission path, and serial queues never come here.
    @inline(never)
    final func tryRedirectAtOnce(_ node: Continuation) -> Bool {
        // sequentiallyConsistent, the load and the CAS: as trySyncAcquire's, against the
        // drain owner's unlock (tryUnlockDrain) and a producer's push then `wakeup`.
        var s = state.load(ordering: .sequentiallyConsistent)
        let limit = UInt64(width.load(ordering: .relaxed))
        while true {
            let q = QueueState(s)
            if q.isEnqueued || q.isSuspended || q.inFlight >= limit { return false }
            // An item pushed earlier is either still queued (seen here) or was popped by a
            // drain that holds ENQUEUED until it has redirected it (seen above, or the
            // compare-exchange fails).
            if !items.isEmpty { return false }
            let (done, now) = state.weakCompareExchange(expected: s, desired: s + 1, ordering: .sequentiallyConsistent)
            if done {
                // Width held: the queue references itself while anything is in flight.
                if q.inFlight == 0 { _ = Unmanaged.passUnretained(self).retain() }
                redirect(node)
                return true
            }
            s = now
        }
    }

    /// Schedules a drain if the queue has work, is runnable, and none is scheduled.
    /// (The shared drain's `take`, QueueDrain.swift: the sequentially consistent load pairs
    /// with the drain owner's unlock, `tryUnlockDrain`.)
    @inline(__always)
    final func wakeup() {
        if DrainLock.take(state, lock: QueueState.enqueued, when: { s in
            !QueueState(s).isSuspended && (!items.isEmpty || pendingHead.load(ordering: .relaxed) != 0)
        }) {
            scheduleDrain(retain: true)
        }
    }

    /// The caller owns ENQUEUED: puts one drain of this queue on its target; the main
    /// queue's and a run loop's queue's own threads are woken instead. `retain` takes the
    /// ARC retain a scheduled drain owns (false when the caller passes its own on).
    @inline(__always)
    final func scheduleDrain(retain: Bool) {
        if role == .main {
            MainQueueDriver.wake()
            return
        }
        if role == .runloop {
            unsafeDowncast(self, to: RunLoopQueue.self).poke()
            return
        }
        // Whoever takes a new retain for the node (a wakeup, a sync caller giving the queue
        // back) holds a reference to this queue, which holds its target.
        pushDrainNode(onto: unmanagedTarget!, retain: retain, callerHoldsObject: true)
    }
}

/// Runs a scheduled drain; `context` is the queue, carrying the drain's retain.
let drainTrampoline: DispatchFunction = { context in
    Unmanaged<DispatchQueue>.fromOpaque(context!).takeUnretainedValue().drain()
}

/// A tiny test-and-test-and-set lock for rarely contended, very short sections. A
/// non-copyable struct, so it lives inline in its owner (no allocation per queue).
/// A SpinLock with a reference's identity, for a static (a noncopyable struct cannot be
/// a static stored property's value behind a lazy initialiser on every toolchain).
final class SpinLockBox: Sendable {
    let lock = SpinLock()
}

struct SpinLock: ~Copyable, @unchecked Sendable {
    private let locked = Atomic<Bool>(false)
    init() {}
    @inline(__always)
    func lock() {
        while locked.exchange(true, ordering: .acquiring) {
            var spins = 0
            while locked.load(ordering: .relaxed) {
                spins += 1
                if spins < 64 { gc_cpu_relax() } else { sched_yield() }
            }
        }
    }
    @inline(__always)
    func unlock() { locked.store(false, ordering: .releasing) }

    /// The child of a fork: a parent's thread may have held it; that thread is gone.
    func resetInForkChild() { locked.store(false, ordering: .relaxed) }
    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock(); defer { unlock() }
        return try body()
    }
}
