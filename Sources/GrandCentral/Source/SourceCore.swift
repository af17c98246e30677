import CGrandCentral
import Glibc
import Synchronization

// Sources: the engine side of dispatch_source_t.
//
// A source is a queue-like object. It has a target queue, a state word (`SourceState`:
// inactive, suspended, drain lock, pending event, cancelled, ...) and an atomic data word
// (`pendingData`), and it is drained by the same drain as a queue (`DrainedObject`,
// QueueDrain.swift): whoever makes it runnable sets its drain lock (ENQUEUED,
// `DrainLock.take`) and schedules one drain node on the target; the drain runs there under
// a `DrainBudget`, asks "is there work?" (`SourceState.hasWork`) and runs it (the
// registration handler, the event handler with the data merged so far, or the cancel
// handler), then gives the lock back with the same clear-then-recheck as a queue
// (`DrainLock.giveBack`) and ends through the same `finishDrain`. So handlers run on the
// target queue, never on the event thread; with a serial target they are serialized with
// the queue's other items; and one drain at a time means the event handler never runs
// concurrently with itself.
//
// Where events come from is the source's kind, behind one interface (`SourceMonitor`):
// `start` registers with the event thread on activation, `stop` unregisters on cancel and
// reports back (`monitorDidStop`) once no event can arrive any more, `suspend`/`resume`
// let a kind stop costing wakeups, and `eventHandlerDidReturn` re-arms a one-shot
// registration (read and write sources). Each kind's monitor and its event-thread
// registration live in their own files (TimerSource.swift, DescriptorSource.swift,
// SignalSource.swift, ProcessSource.swift, VnodeSource.swift); data sources have no monitor
// of their own (`dispatch_source_merge_data` is their event).
//
// Lifetimes. The engine holds the core while it needs it (a started monitor's
// registration, a scheduled drain), so the client's references are counted apart from
// ARC's: in C, `dispatch_release` moves the object's external count, and when it reaches
// zero the source is cancelled without running its cancel handler (libdispatch's
// behaviour: a released timer stops firing), even though the core lives on until its
// monitor has stopped. `SourceCore` is the C handle. Swift code holds a `DispatchSource`
// (DispatchSource.swift), a small object over the core whose deinit does the same.

/// What a source calls: a function and its argument. The argument is either fixed (a
/// block, a Swift closure box) or, for the `_f` setters, the source's context as it is
/// when the handler runs (libdispatch reads `dispatch_get_context` at each call).
///
/// A class, so that a drain can hold the handler it is running while another thread
/// replaces it: the replaced handler is disposed of (`dispose(context)`: the block
/// released, the closure box freed) when the last holder lets go.
final class SourceHandler: @unchecked Sendable {
    let function: DispatchFunction
    let context: UnsafeMutableRawPointer?
    let usesSourceContext: Bool
    let dispose: DispatchFunction?

    init(function: DispatchFunction, context: UnsafeMutableRawPointer?, usesSourceContext: Bool,
         dispose: DispatchFunction?) {
        self.function = function
        self.context = context
        self.usesSourceContext = usesSourceContext
        self.dispose = dispose
    }

    deinit { dispose?(context) }
}

/// A handler as a source stores it: a plain function called with the source's context
/// (the `_f` setters: no allocation kept per handler), or a `SourceHandler` object (a block
/// or a closure, whose context must be disposed of).
enum StoredHandler {
    case none
    case sourceContext(DispatchFunction)
    case object(SourceHandler)

    init(_ handler: SourceHandler?) {
        guard let handler else { self = .none; return }
        if handler.usesSourceContext && handler.dispose == nil {
            self = .sourceContext(handler.function)
        } else {
            self = .object(handler)
        }
    }
}

/// The engine's source. See the file comment.
///
/// Who may touch what:
/// - `type`, `handle`, `mask`, `monitor`: immutable after init.
/// - `state`, `pendingData`, `deliveredData`, `targetBits`: atomics, any thread.
/// - the three handlers (`handlerWords`, `handlerCases`), `retiredTargets`: under `handlerLock`.
/// - `context` (DispatchObject's): plain, like a queue's; the client orders setting it
///   with using it.
/// - `lifecycleLock` serializes activation, cancellation and suspension transitions of the
///   monitor (start, stop, suspend, resume), so a monitor never sees `stop` before `start`.
final class SourceCore: DispatchObject, @unchecked Sendable {
    // Bytes first (they share a word after DispatchObject's own), then words: Swift lays
    // stored properties out in declaration order, and every source is one of these. The
    // bytes fill the word after DispatchObject's two bytes exactly (the case byte, the
    // 4-byte `type`, the locks, the flag, the 4-byte thread id): a core is 168 bytes, a
    // 176-byte malloc chunk (185 bytes, a 208-byte chunk, with the handlers as three
    // 9-byte `StoredHandler` enums padded to 16 and these bytes between them).
    /// The case of each handler word, two bits per `SourceHandlerKind` (see
    /// `handlerWords`). Under `handlerLock`.
    private var handlerCases: UInt8 = 0
    let type: SourceType
    let handlerLock = SpinLock()
    let lifecycleLock = SpinLock()
    /// Set by dispatch_source_set_mandatory_cancel_handler(_f): releasing the source before
    /// it is cancelled is a client bug. Written by the client before activation.
    let hasMandatoryCancel = Atomic<Bool>(false)
    /// The kernel thread id of the thread running one of this source's handlers, or 0:
    /// lets dispatch_source_cancel_and_wait recognise a call from inside a handler (which
    /// would wait for itself). Stored and cleared only by the drain (relaxed: the only
    /// reader that acts on it is the very thread that stored its own id).
    let handlerThread = Atomic<Int32>(0)

    let handle: UInt
    let mask: UInt
    /// Set once in init (a monitor may need the core's address), read-only afterwards.
    private(set) var monitor: any SourceMonitor = dataSourceMonitor

    let state = Atomic<UInt64>(SourceState.inactive)
    /// Data merged by events and not yet delivered (added, or-ed or replaced by kind).
    let pendingData = Atomic<UInt>(0)
    /// The data of the event being (or last) delivered: `dispatch_source_get_data`.
    let deliveredData = Atomic<UInt>(0)
    /// The target queue, an unmanaged retained reference (never 0 after init).
    let targetBits = Atomic<UInt>(0)
    /// The queue the drain node was last pushed to (bits as in `targetBits`). Written only by
    /// the ENQUEUED owner before it pushes the node; read by the drain the node runs.
    private var drainQueueBits: UInt = 0
    /// Replaced targets, kept until deinit (a wakeup may be pushing onto one right now).
    private var retiredTargets: [DispatchQueue] = []

    /// The event, cancel and registration handlers (`StoredHandler`s, by
    /// `SourceHandlerKind`), packed: a word each here, the case in `handlerCases`. A word
    /// is 0 (`.none`), a function's address (`.sourceContext`), or a `SourceHandler` with
    /// one retain that the word owns (`.object`). Under `handlerLock`.
    private var handlerWords: (UInt, UInt, UInt) = (0, 0, 0)

    /// Event handler calls a drain makes before it yields its thread back to the target
    /// (`DrainBudget`).
    static let drainBudget = 16

    init(type: SourceType, handle: UInt, mask: UInt, target: DispatchQueue) {
        self.type = type
        self.handle = handle
        self.mask = mask
        targetBits.store(UInt(bitPattern: Unmanaged.passRetained(target).toOpaque()), ordering: .relaxed)
        super.init(kind: .source)
        monitor = type.makeMonitor(for: self)
    }

    /// `dispatch_source_create`: nil when the type does not accept the handle or mask.
    static func make(type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?) -> SourceCore? {
        guard type.accepts(handle: handle, mask: mask) else { return nil }
        let target = queue ?? RootQueues.queue(qos: .default, overcommit: false)
        return SourceCore(type: type, handle: handle, mask: mask, target: target)
    }

    deinit {
        runFinalizer()  // on the target, which must still be alive
        let bits = targetBits.load(ordering: .acquiring)
        Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
        dropHandlers()  // the words' retains (the packed handlers are not released by ARC)
    }

    // MARK: DispatchObject

    override var finalizerQueue: DispatchQueue? { target }

    /// The C client's last reference: libdispatch refuses to release an inactive or
    /// suspended source; an active one is cancelled without its cancel handler (a released
    /// timer stops firing), and lives on only until its monitor has stopped.
    override func externalRefsDidReachZero() {
        let s = SourceState(state.load(ordering: .acquiring))
        if hasMandatoryCancel.load(ordering: .relaxed) && !s.has(SourceState.cancelled) {
            clientBug("dispatch_release", "release of a source that has a mandatory cancel handler and was not cancelled")
        }
        if s.has(SourceState.inactive) { clientBug("dispatch_release", "release of an inactive object") }
        if s.suspendCount > 0 { clientBug("dispatch_release", "release of a suspended object") }
        cancel(runCancelHandler: false)
    }

    override func setTargetObject(_ target: DispatchQueue?, caller: StaticString) { setTarget(target) }

    /// `dispatch_source_set_timer`: a timer source's schedule; misuse on any other kind.
    func setTimer(start: UInt64, interval: UInt64, leeway: UInt64, caller: StaticString) {
        guard let timer = monitor as? SourceTimer else { clientBug(caller, "source is not a timer source") }
        timer.setTimer(start: start, interval: interval, leeway: leeway)
    }

    // MARK: Target

    var target: DispatchQueue {
        Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: targetBits.load(ordering: .acquiring))!)
            .takeUnretainedValue()
    }

    /// `dispatch_set_target_queue` on a source: nil is the default root queue.
    func setTarget(_ newTarget: DispatchQueue?) {
        let target = newTarget ?? RootQueues.queue(qos: .default, overcommit: false)
        let bits = UInt(bitPattern: Unmanaged.passRetained(target).toOpaque())
        let old = targetBits.exchange(bits, ordering: .acquiringAndReleasing)
        let previous = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: old)!).takeRetainedValue()
        handlerLock.withLock { retiredTargets.append(previous) }
    }

    // MARK: Handlers

    func setHandler(_ kind: SourceHandlerKind, _ handler: SourceHandler?) {
        let stored = StoredHandler(handler)
        // The old handler is released outside the lock (its dispose may do anything).
        let old: StoredHandler = handlerLock.withLock { exchangeHandlerLocked(kind, stored) }
        _ = old
    }

    func handler(_ kind: SourceHandlerKind) -> StoredHandler {
        handlerLock.withLock {
            let word = handlerWordLocked(kind)
            switch (handlerCases >> (2 * kind.rawValue)) & 3 {
            case 1: return .sourceContext(unsafeBitCast(UnsafeRawPointer(bitPattern: word)!, to: DispatchFunction.self))
            case 2: return .object(Unmanaged<SourceHandler>.fromOpaque(UnsafeRawPointer(bitPattern: word)!).takeUnretainedValue())
            default: return .none
            }
        }
    }

    private func dropHandlers() {
        let dropped: (StoredHandler, StoredHandler, StoredHandler) = handlerLock.withLock {
            (exchangeHandlerLocked(.event, .none), exchangeHandlerLocked(.cancel, .none),
             exchangeHandlerLocked(.registration, .none))
        }
        _ = dropped
    }

    /// Stores `new` as the `kind` handler and returns the one it replaces, which takes over
    /// the word's retain of an object. Under `handlerLock`.
    private func exchangeHandlerLocked(_ kind: SourceHandlerKind, _ new: StoredHandler) -> StoredHandler {
        let shift = 2 * kind.rawValue
        let word = handlerWordLocked(kind)
        let old: StoredHandler
        switch (handlerCases >> shift) & 3 {
        case 1: old = .sourceContext(unsafeBitCast(UnsafeRawPointer(bitPattern: word)!, to: DispatchFunction.self))
        case 2: old = .object(Unmanaged<SourceHandler>.fromOpaque(UnsafeRawPointer(bitPattern: word)!).takeRetainedValue())
        default: old = .none
        }
        let (newWord, newCase): (UInt, UInt8)
        switch new {
        case .none: (newWord, newCase) = (0, 0)
        case .sourceContext(let function): (newWord, newCase) = (UInt(bitPattern: unsafeBitCast(function, to: UnsafeRawPointer.self)), 1)
        case .object(let object): (newWord, newCase) = (UInt(bitPattern: Unmanaged.passRetained(object).toOpaque()), 2)
        }
        switch kind {
        case .event: handlerWords.0 = newWord
        case .cancel: handlerWords.1 = newWord
        case .registration: handlerWords.2 = newWord
        }
        handlerCases = handlerCases & ~(3 << shift) | newCase << shift
        return old
    }

    @inline(__always)
    private func handlerWordLocked(_ kind: SourceHandlerKind) -> UInt {
        switch kind {
        case .event: return handlerWords.0
        case .cancel: return handlerWords.1
        case .registration: return handlerWords.2
        }
    }

    /// Calls `handler`, if there is one. The copy the caller holds keeps a replaced
    /// handler's context alive until the call returns.
    @inline(__always)
    private func invoke(_ handler: StoredHandler) {
        if case .none = handler { return }
        handlerThread.store(gc_thread_id(), ordering: .relaxed)
        switch handler {
        case .none: break
        case .sourceContext(let function): function(context)
        case .object(let object): object.function(object.usesSourceContext ? context : object.context)
        }
        handlerThread.store(0, ordering: .relaxed)
    }

    /// `dispatch_source_cancel_and_wait`: cancels, then returns once the cancellation is
    /// complete: the monitor has stopped and no handler of the source is running or will
    /// run again. As in libdispatch: a source with a cancel handler, a suspended source, or
    /// a call from one of the source's own handlers is a client bug; an inactive source is
    /// cancelled and activated (it never registered, so there is nothing to wait for).
    ///
    /// The wait polls the state word with a growing sleep (10 µs up to 1 ms) until
    /// CANCEL_DONE. A drain that is running (a handler, perhaps) completes the cancellation
    /// itself. Once the monitor has stopped and no drain runs (no drain lock, or its node
    /// WAITING on a queue: a suspended target, or one above it, may hold it until a resume),
    /// the caller completes it in the drain's place, as libdispatch's caller does when it
    /// can take the source's drain lock: there is no cancel handler to run, only CANCEL_DONE
    /// to set and the handlers to drop (see `SourceState`, WAITING). Rejected: a private
    /// cancel handler that signals the waiter (it races with a drain that already found no
    /// handler, and it would still wait for the target's resume).
    func cancelAndWait(caller: StaticString) {
        if case .none = handler(.cancel) {} else { clientBug(caller, "source has a cancel handler") }
        let s = SourceState(state.load(ordering: .acquiring))
        if s.has(SourceState.inactive) && s.suspendCount == 0 {
            cancel()
            activateObject()
            return
        }
        if s.suspendCount > 0 { clientBug(caller, "source is suspended") }
        if handlerThread.load(ordering: .relaxed) == gc_thread_id() {
            clientBug(caller, "called from a handler of the source")
        }
        cancel()
        var pause: Int = 10_000
        BlockingRegion.enter()
        while !completeCancelInPlaceOfDrain() {
            var request = timespec(tv_sec: 0, tv_nsec: pause)
            nanosleep(&request, nil)
            pause = min(pause * 2, 1_000_000)
        }
        BlockingRegion.leave()
    }

    /// For `cancelAndWait`: whether the cancellation is complete, completing it when the
    /// drain is not running (see `SourceState`, WAITING). The caller has cancelled the
    /// source, which has no cancel handler.
    private func completeCancelInPlaceOfDrain() -> Bool {
        var s = state.load(ordering: .sequentiallyConsistent)
        while true {
            let q = SourceState(s)
            if q.has(SourceState.cancelDone) { return true }
            guard q.has(SourceState.cancelled) && q.has(SourceState.stopped)
                && (!q.has(SourceState.enqueued) || q.has(SourceState.waiting)) else { return false }
            let desired = (s | SourceState.cancelDone) & ~SourceState.registration
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .sequentiallyConsistent)
            if done { break }
            s = now
        }
        // What the drain does after a cancel handler (there is none): breaks the cycles a
        // handler that captures its source makes.
        dropHandlers()
        return true
    }

    // MARK: Lifecycle (any thread)

    /// `dispatch_activate`, or the `dispatch_resume` that activates: starts the monitor,
    /// makes the registration handler due. A no-op on an active source.
    override func activateObject() {
        lifecycleLock.lock()
        // One transition: a merge racing with activation must not find the source active
        // without its registration handler due (that handler runs before the first event).
        var s = state.load(ordering: .relaxed)
        while true {
            guard s & SourceState.inactive != 0 else {
                lifecycleLock.unlock()
                return
            }
            var desired = s & ~SourceState.inactive
            if s & SourceState.cancelled == 0 { desired |= SourceState.started | SourceState.registration }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .sequentiallyConsistent)
            if done { break }
            s = now
        }
        if s & SourceState.cancelled == 0 {
            monitor.start(self)
            // Suspended before it was activated: the monitor starts suspended too (a timer
            // must not fire, and cost wakeups, until the resume).
            if SourceState(s).suspendCount > 0 { monitor.suspend(self) }
        }
        lifecycleLock.unlock()
        wakeup()
    }

    /// `dispatch_source_cancel`: final; no event handler starts after the drain sees it.
    /// The monitor stops; once it has, the cancel handler runs (on the target, after the
    /// last event handler returned, and only while the source is not suspended).
    /// `runCancelHandler: false` is the implicit cancel of a released source.
    func cancel(runCancelHandler: Bool = true) {
        lifecycleLock.lock()
        let old = state.bitwiseOr(SourceState.cancelled, ordering: .sequentiallyConsistent).oldValue
        if old & SourceState.cancelled != 0 {
            // Already cancelled: a release after dispatch_source_cancel still runs the
            // cancel handler, as in libdispatch.
            lifecycleLock.unlock()
            return
        }
        // Dropped before the monitor can stop (the drain runs the cancel handler only
        // once STOPPED is set); released after the lock (its dispose may do anything).
        let dropped = runCancelHandler ? nil : handler(.cancel)
        if !runCancelHandler { setHandler(.cancel, nil) }
        // No event or registration handler starts after this (a drain running one holds
        // its own reference): drop them now, which also breaks the cycle a handler that
        // captures its source makes, even if the source never runs again (an inactive or
        // suspended source keeps only its cancel handler).
        let droppedEvent = handler(.event), droppedRegistration = handler(.registration)
        setHandler(.event, nil)
        setHandler(.registration, nil)
        defer { _ = (dropped, droppedEvent, droppedRegistration) }
        if old & SourceState.started != 0 {
            monitor.stop(self)  // calls monitorDidStop, now or later
        } else {
            state.bitwiseOr(SourceState.stopped, ordering: .sequentiallyConsistent)
        }
        lifecycleLock.unlock()
        withExtendedLifetime(dropped) {}
        wakeup()
    }

    /// Whether a registration failed for want of a resource (a negative errno): the
    /// failures that `cancelForWantOf` answers.
    static func isWantOfResource(_ negativeErrno: Int32) -> Bool {
        negativeErrno == -EMFILE || negativeErrno == -ENFILE || negativeErrno == -ENOMEM || negativeErrno == -ENOSPC
    }

    /// The rule for a source whose monitor could not register for want of a resource (a
    /// descriptor, kernel memory, an inotify watch): the library cancels it, so the
    /// program sees it (its cancel handler runs, `dispatch_source_testcancel` is non-zero)
    /// instead of holding a source that never fires (source.h). Called by a monitor's
    /// `start`, under `lifecycleLock`, so the cancel itself runs as a work item on the
    /// default root queue, which holds a reference on the source until it has run.
    /// Rejected: retrying when descriptors are freed (nothing tells the library when that
    /// happens but polling, and a program at its limit is better told than kept waiting).
    /// `negativeErrno` 0: the error is not known (the descriptor table does not carry it).
    func cancelForWantOf(_ call: StaticString, error negativeErrno: Int32) {
        if DebugLog.enabled {
            let why = negativeErrno == 0 ? "" : ": \(String(cString: strerror(-negativeErrno)))"
            DebugLog.source("\(type.name) source \(handle): \(call) failed\(why); the library cancels it")
        }
        RootQueues.defaultQueue.enqueue(cancelForWantOfResource, Unmanaged.passRetained(self).toOpaque())
    }

    var isCancelled: Bool { SourceState(state.load(ordering: .acquiring)).has(SourceState.cancelled) }

    /// The monitor's report that no event will be merged again. Any thread, once.
    func monitorDidStop() {
        state.bitwiseOr(SourceState.stopped, ordering: .sequentiallyConsistent)
        wakeup()
    }

    override func suspendObject() {
        lifecycleLock.lock()
        let old = state.wrappingAdd(SourceState.suspendUnit, ordering: .sequentiallyConsistent).oldValue
        let s = SourceState(old)
        if s.suspendCount == 0 && s.has(SourceState.started) && !s.has(SourceState.cancelled) {
            monitor.suspend(self)
        }
        lifecycleLock.unlock()
    }

    override func resumeObject(caller: StaticString) {
        lifecycleLock.lock()
        var s = state.load(ordering: .relaxed)
        while true {
            let q = SourceState(s)
            if q.suspendCount == 0 {
                lifecycleLock.unlock()
                if q.has(SourceState.inactive) { return activateObject() }
                clientBug(caller, "over-resume of an object that is not suspended")
            }
            let (done, now) = state.weakCompareExchange(expected: s, desired: s - SourceState.suspendUnit,
                                                        ordering: .sequentiallyConsistent)
            if done { break }
            s = now
        }
        let q = SourceState(s)
        if q.suspendCount == 1 && q.has(SourceState.started) && !q.has(SourceState.cancelled) {
            monitor.resume(self)
        }
        lifecycleLock.unlock()
        wakeup()
    }

    // MARK: Merging events (monitors, dispatch_source_merge_data; any thread)

    /// Adds `value` to the pending data and makes the source pending.
    @inline(__always)
    func mergeAdd(_ value: UInt) {
        pendingData.wrappingAdd(value, ordering: .sequentiallyConsistent)
        markPending()
    }

    /// Or-s `value` into the pending data and makes the source pending.
    @inline(__always)
    func mergeOr(_ value: UInt) {
        pendingData.bitwiseOr(value, ordering: .sequentiallyConsistent)
        markPending()
    }

    /// Replaces the pending data with `value` and makes the source pending.
    @inline(__always)
    func mergeReplace(_ value: UInt) {
        pendingData.store(value, ordering: .sequentiallyConsistent)
        markPending()
    }

    /// `dispatch_source_merge_data` on a data source (any other kind ignores it, as
    /// libdispatch does). Zero adds or ors nothing; a replace with zero is stored, taking
    /// back a pending event (the drain skips zero data), as in libdispatch.
    func mergeData(_ value: UInt, caller: StaticString = "dispatch_source_merge_data") {
        if value == 0 && type != .dataReplace { return }
        switch type {
        case .dataAdd: mergeAdd(value)
        case .dataOr: mergeOr(value)
        case .dataReplace: mergeReplace(value)
        default:
            // libdispatch crashes here too; say why.
            clientBug(caller, "the source is not a DATA_ADD, DATA_OR or DATA_REPLACE source")
        }
    }

    /// Drops the data merged but not yet delivered (a timer set again). A drain that
    /// already took it delivers it; one that has not finds nothing pending.
    func discardPendingData() {
        state.bitwiseAnd(~SourceState.pending, ordering: .sequentiallyConsistent)
        pendingData.store(0, ordering: .sequentiallyConsistent)
    }

    /// Sets PENDING (after the data word changed) and wakes the source if that made it
    /// runnable.
    ///
    /// Skipping the read-modify-write when PENDING is already set is safe: the drain clears
    /// PENDING before it takes `pendingData` (both sequentially consistent), so a merger
    /// that still sees PENDING after its own data update knows a later take will see that
    /// update.
    @inline(__always)
    private func markPending() {
        var s = state.load(ordering: .sequentiallyConsistent)
        if s & SourceState.pending != 0 { return }
        s = state.bitwiseOr(SourceState.pending, ordering: .sequentiallyConsistent).oldValue | SourceState.pending
        if s & SourceState.enqueued == 0 && SourceState(s).hasWork { wakeup() }
    }

    // MARK: The drain (DrainedObject, QueueDrain.swift)

    /// Schedules a drain if the source has work and none is scheduled. WAITING is set with
    /// the lock: the node is not running yet.
    func wakeup() {
        if DrainLock.take(state, lock: SourceState.enqueued, also: SourceState.waiting,
                          when: { SourceState($0).hasWork }) {
            scheduleDrain(retain: true)
        }
    }

    /// The caller owns ENQUEUED (and WAITING is set): puts one drain node on the current
    /// target and records which queue that is. A waker need not hold a reference of its
    /// own (the event thread merges through its registration), so the target is always
    /// held across the push.
    func scheduleDrain(retain: Bool) {
        let bits = targetBits.load(ordering: .acquiring)  // pairs with setTarget's exchange
        drainQueueBits = bits
        pushDrainNode(onto: Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!),
                      retain: retain, callerHoldsObject: false)
    }

    /// The source's drain (the per-kind hook); runs on the target queue with ENQUEUED and
    /// one retain of the core.
    ///
    /// No handler starts while the target, or a queue above it in its target chain, is
    /// suspended: before each handler the drain looks up the chain (`targetChainIsSuspended`)
    /// and, if one is suspended, yields: keeps the lock and the retain and puts its node back
    /// on the target (`yieldDrain`, then `finishDrain`). Events that arrive meanwhile only
    /// merge into `pendingData` (ENQUEUED is held, so they schedule nothing), and the node
    /// delivers them all at once when it runs again, after the resume. Checking once when the
    /// drain starts would not do: a handler may suspend its own target, and the drain runs up
    /// to `drainBudget` handlers.
    func drainWork() -> DrainOutcome {
        // Running now: from here until the node is parked again or the lock is given back,
        // only this drain completes a cancellation (`SourceState`, WAITING).
        state.bitwiseAnd(~SourceState.waiting, ordering: .sequentiallyConsistent)
        var budget = DrainBudget(SourceCore.drainBudget)
        while true {
            while true {
                let s = SourceState(state.load(ordering: .acquiring))
                guard s.hasWork else { break }
                // After the load of the state: an event merged after a dispatch_suspend
                // returned was seen through PENDING, whose seq-cst store follows the suspend
                // in the merger's order, so this load sees the suspension.
                if targetChainIsSuspended() || targetBits.load(ordering: .acquiring) != drainQueueBits {
                    return yieldDrain()
                }
                if s.has(SourceState.registration) {
                    state.bitwiseAnd(~SourceState.registration, ordering: .sequentiallyConsistent)
                    if !s.has(SourceState.cancelled) { invoke(handler(.registration)) }
                    continue
                }
                if s.has(SourceState.cancelled) {
                    if s.has(SourceState.stopped) && !s.has(SourceState.cancelDone) {
                        state.bitwiseOr(SourceState.cancelDone, ordering: .sequentiallyConsistent)
                        invoke(handler(.cancel))
                        // Breaks the cycles a handler that captures its source makes.
                        dropHandlers()
                    }
                    break
                }
                guard s.has(SourceState.pending) else { break }
                state.bitwiseAnd(~SourceState.pending, ordering: .sequentiallyConsistent)
                let data = pendingData.exchange(0, ordering: .sequentiallyConsistent)
                if data == 0 && !type.firesWithZeroData { continue }
                deliveredData.store(data, ordering: .releasing)
                invoke(handler(.event))
                monitor.eventHandlerDidReturn(self)
                if budget.spend(workRemains: { SourceState(state.load(ordering: .relaxed)).hasWork }) {
                    return yieldDrain()
                }
            }
            if tryUnlockDrain() { return .unlocked }
        }
    }

    /// Whether the target queue or a queue above it is suspended (or inactive). Every queue
    /// keeps its replaced targets alive, so the walk never reads a freed queue.
    private func targetChainIsSuspended() -> Bool {
        var queue = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: targetBits.load(ordering: .acquiring))!)
        while true {
            let (suspended, next) = queue._withUnsafeGuaranteedRef {
                // Seq-cst: pairs with a suspender's seq-cst RMW (suspendQueue), against a
                // merger's PENDING store (see the check in drainWork).
                (QueueState($0.state.load(ordering: .sequentiallyConsistent)).isSuspended, $0.unmanagedTarget)
            }
            if suspended { return true }
            guard let next else { return false }
            queue = next
        }
    }

    /// Before the drain returns `.yielded` (its node goes back on the target, keeping the
    /// lock and the retain, `finishDrain` → `scheduleDrain`): marks the lock WAITING. The
    /// drain continues when the target runs the node again. A suspended target keeps the
    /// node until its resume. When only a queue above the target is suspended, the target's
    /// running drain may pop the node again at once; each such pop costs a state load per
    /// level, and the target's drain yields to its own (suspended) target within its budget,
    /// where the node then waits.
    private func yieldDrain() -> DrainOutcome {
        // Before the push: once the node is visible it may run (and clear WAITING) at once.
        // From here on this drain reads neither the handlers nor the state word.
        state.bitwiseOr(SourceState.waiting, ordering: .sequentiallyConsistent)
        return .yielded
    }

    /// Gives up the drain lock (`DrainLock.giveBack`); returns false (the lock kept) when
    /// work arrived meanwhile. Every bit that makes work is set by an atomic on this same
    /// word, so the CAS that clears the lock either sees it (and keeps the lock) or happens
    /// before it (and the setter's wakeup schedules a new drain): nothing to look for
    /// elsewhere.
    private func tryUnlockDrain() -> Bool {
        DrainLock.giveBack(state, lock: SourceState.enqueued, keepFor: { SourceState($0).hasWork },
                           workElsewhere: { false }, mayRetake: { _ in false })
    }

    // MARK: Description

    /// `source[0x…] = { type, refcount, handle, mask, data, pending, suspended, inactive,
    /// cancelled, target }` (DispatchObject's "Description"). data: what the handler last
    /// saw (`dispatch_source_get_data`); pending: accumulated, not yet delivered.
    override func debugDescription() -> String {
        let s = SourceState(state.load(ordering: .relaxed))
        return describe([
            ("type", type.name),
            ("refcount", debugRefcount),
            ("handle", "\(handle)"),
            ("mask", "0x" + String(mask, radix: 16)),
            ("data", "\(deliveredData.load(ordering: .relaxed))"),
            ("pending", "\(pendingData.load(ordering: .relaxed))"),
            ("suspended", "\(s.suspendCount)"),
            ("inactive", "\(s.has(SourceState.inactive))"),
            ("cancelled", "\(s.has(SourceState.cancelled))"),
            ("target", DispatchObject.quoted(target.labelString)),
        ])
    }
}

extension SourceCore: DrainedObject {
    static var drainNodeFunction: DispatchFunction { sourceDrainTrampoline }
    static var drainNodeFlags: ContinuationFlags { [] }
}

/// Runs a scheduled source drain; `context` is the core, carrying the drain's retain.
let sourceDrainTrampoline: DispatchFunction = { context in
    Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue().drain()
}

/// A work item: the cancel of `SourceCore.cancelForWantOf`, with the reference it took.
private let cancelForWantOfResource: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.cancel()
}
