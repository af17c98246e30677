import CGrandCentral
import Glibc
import Synchronization

// Sources: the engine side of dispatch_source_t.
//
// A source is a queue-like object. It has a target queue, a state word (`SourceState`:
// inactive, suspended, drain lock, pending event, cancelled, ...) and an atomic data word
// (`pendingData`), and it is drained the way a queue is: whoever makes it runnable sets its
// drain lock (ENQUEUED) and schedules one drain node on the target; the drain runs there,
// asks "is there work?" (`SourceState.hasWork`) and runs it (the registration handler, the
// event handler with the data merged so far, or the cancel handler), then gives the lock
// back with the same clear-then-recheck as a queue (`tryUnlockDrain`). So handlers run on
// the target queue, never on the event thread; with a serial target they are serialized
// with the queue's other items; and one drain at a time means the event handler never runs
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
// Two objects, because of lifetimes. `DispatchSource` (the C handle and the Swift class)
// is what the client holds; `SourceCore` is what the engine holds: the event thread's
// registration, scheduled drains. When the client's last reference goes, the source is
// cancelled without running its cancel handler (libdispatch's behaviour: a released
// timer stops firing), even though the engine still holds the core until the monitor has
// stopped.

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

/// Which handler a setter sets.
enum SourceHandlerKind: Int {
    case event = 0
    case cancel = 1
    case registration = 2
}

/// The engine's source. See the file comment.
///
/// Who may touch what:
/// - `type`, `handle`, `mask`, `monitor`: immutable after init.
/// - `state`, `pendingData`, `deliveredData`, `targetBits`: atomics, any thread.
/// - `handlers`, `retiredTargets`: under `handlerLock`.
/// - `context`: plain, like a queue's; the client orders setting it with using it.
/// - `lifecycleLock` serializes activation, cancellation and suspension transitions of the
///   monitor (start, stop, suspend, resume), so a monitor never sees `stop` before `start`.
final class SourceCore: @unchecked Sendable {
    let type: SourceType
    let handle: UInt
    let mask: UInt
    let monitor: SourceMonitor

    let state = Atomic<UInt64>(SourceState.inactive)
    /// Data merged by events and not yet delivered (added, or-ed or replaced by kind).
    let pendingData = Atomic<UInt>(0)
    /// The data of the event being (or last) delivered: `dispatch_source_get_data`.
    let deliveredData = Atomic<UInt>(0)
    /// The target queue, an unmanaged retained reference (never 0 after init).
    let targetBits = Atomic<UInt>(0)

    var context: UnsafeMutableRawPointer?

    let handlerLock = SpinLock()
    private var handlers: [SourceHandler?] = [nil, nil, nil]
    /// Replaced targets, kept until deinit (a wakeup may be pushing onto one right now).
    private var retiredTargets: [DispatchQueue] = []

    let lifecycleLock = SpinLock()

    /// Event handler calls a drain makes before it yields its thread back to the target.
    static let drainBudget = 16

    init(type: SourceType, handle: UInt, mask: UInt, target: DispatchQueue) {
        self.type = type
        self.handle = handle
        self.mask = mask
        self.monitor = type.makeMonitor()
        targetBits.store(UInt(bitPattern: Unmanaged.passRetained(target).toOpaque()), ordering: .relaxed)
    }

    deinit {
        let bits = targetBits.load(ordering: .acquiring)
        Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
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
        // The old handler is released outside the lock (its dispose may do anything).
        let old: SourceHandler? = handlerLock.withLock {
            let previous = handlers[kind.rawValue]
            handlers[kind.rawValue] = handler
            return previous
        }
        _ = old
    }

    func handler(_ kind: SourceHandlerKind) -> SourceHandler? {
        handlerLock.withLock { handlers[kind.rawValue] }
    }

    var hasCancelHandler: Bool { handler(.cancel) != nil }

    private func dropHandlers() {
        let dropped: [SourceHandler?] = handlerLock.withLock {
            let all = handlers
            handlers = [nil, nil, nil]
            return all
        }
        _ = dropped
    }

    @inline(__always)
    private func invoke(_ handler: SourceHandler) {
        handler.function(handler.usesSourceContext ? context : handler.context)
    }

    // MARK: Lifecycle (any thread)

    /// `dispatch_activate`, or the `dispatch_resume` that activates: starts the monitor,
    /// makes the registration handler due. A no-op on an active source.
    func activate() {
        lifecycleLock.lock()
        let old = state.bitwiseAnd(~SourceState.inactive, ordering: .sequentiallyConsistent).oldValue
        guard old & SourceState.inactive != 0 else {
            lifecycleLock.unlock()
            return
        }
        if old & SourceState.cancelled == 0 {
            state.bitwiseOr(SourceState.started | SourceState.registration, ordering: .sequentiallyConsistent)
            monitor.start(self)
        }
        lifecycleLock.unlock()
        wakeup()
    }

    /// `dispatch_source_cancel`: final; no event handler starts after the drain sees it.
    /// The monitor stops; once it has, the cancel handler runs (on the target, after the
    /// last event handler returned, and only while the source is not suspended).
    /// `runCancelHandler: false` is the implicit cancel of a released source.
    func cancel(runCancelHandler: Bool = true) {
        // Only a source nobody cancelled loses its cancel handler: one that was cancelled
        // and then released still runs it, as in libdispatch (cancel, release at once).
        if !runCancelHandler && !isCancelled { setHandler(.cancel, nil) }
        lifecycleLock.lock()
        let old = state.bitwiseOr(SourceState.cancelled, ordering: .sequentiallyConsistent).oldValue
        if old & SourceState.cancelled != 0 {
            lifecycleLock.unlock()
            return
        }
        if old & SourceState.started != 0 {
            monitor.stop(self)  // calls monitorDidStop, now or later
        } else {
            state.bitwiseOr(SourceState.stopped, ordering: .sequentiallyConsistent)
        }
        lifecycleLock.unlock()
        wakeup()
    }

    var isCancelled: Bool { SourceState(state.load(ordering: .acquiring)).has(SourceState.cancelled) }

    /// The monitor's report that no event will be merged again. Any thread, once.
    func monitorDidStop() {
        state.bitwiseOr(SourceState.stopped, ordering: .sequentiallyConsistent)
        wakeup()
    }

    func suspend() {
        lifecycleLock.lock()
        let old = state.wrappingAdd(SourceState.suspendUnit, ordering: .sequentiallyConsistent).oldValue
        let s = SourceState(old)
        if s.suspendCount == 0 && s.has(SourceState.started) && !s.has(SourceState.cancelled) {
            monitor.suspend(self)
        }
        lifecycleLock.unlock()
    }

    func resume(caller: StaticString) {
        lifecycleLock.lock()
        var s = state.load(ordering: .relaxed)
        while true {
            let q = SourceState(s)
            if q.suspendCount == 0 {
                lifecycleLock.unlock()
                if q.has(SourceState.inactive) { return activate() }
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
    /// libdispatch does). Zero merges nothing.
    func mergeData(_ value: UInt) {
        if value == 0 { return }
        switch type {
        case .dataAdd: mergeAdd(value)
        case .dataOr: mergeOr(value)
        case .dataReplace: mergeReplace(value)
        default: return
        }
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

    // MARK: The drain

    /// Schedules a drain if the source has work and none is scheduled.
    func wakeup() {
        var s = state.load(ordering: .sequentiallyConsistent)
        while true {
            let q = SourceState(s)
            if q.has(SourceState.enqueued) || !q.hasWork { return }
            let (done, now) = state.weakCompareExchange(expected: s, desired: s | SourceState.enqueued,
                                                        ordering: .sequentiallyConsistent)
            if done { break }
            s = now
        }
        scheduleDrain()
    }

    /// The caller owns ENQUEUED: puts one drain node on the target, carrying one retain of
    /// this core.
    private func scheduleDrain() {
        let raw = Unmanaged.passRetained(self).toOpaque()
        let target = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: targetBits.load(ordering: .acquiring))!)
        // Held across the push: this core (and its hold on the target) may go away once
        // the drain node is visible.
        let held = target.retain()
        held._withUnsafeGuaranteedRef { $0.enqueue(sourceDrainTrampoline, raw) }
        held.release()
    }

    /// Runs on the target queue; owns ENQUEUED and one retain of the core.
    fileprivate func drain() {
        var budget = SourceCore.drainBudget
        while true {
            while true {
                let s = SourceState(state.load(ordering: .acquiring))
                if s.isSuspended { break }
                if s.has(SourceState.registration) {
                    state.bitwiseAnd(~SourceState.registration, ordering: .sequentiallyConsistent)
                    if !s.has(SourceState.cancelled), let handler = handler(.registration) {
                        invoke(handler)
                    }
                    continue
                }
                if s.has(SourceState.cancelled) {
                    if s.has(SourceState.stopped) && !s.has(SourceState.cancelDone) {
                        state.bitwiseOr(SourceState.cancelDone, ordering: .sequentiallyConsistent)
                        if let handler = handler(.cancel) { invoke(handler) }
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
                if let handler = handler(.event) { invoke(handler) }
                monitor.eventHandlerDidReturn(self)
                budget -= 1
                if budget == 0 && SourceState(state.load(ordering: .relaxed)).hasWork {
                    // Yield: keep the lock and the retain, go to the back of the target's line.
                    let raw = Unmanaged.passUnretained(self).toOpaque()
                    target.enqueue(sourceDrainTrampoline, raw)
                    return
                }
            }
            if tryUnlockDrain() { break }
        }
        Unmanaged.passUnretained(self).release()
    }

    /// Clears ENQUEUED; returns false (the lock taken back) when work arrived meanwhile.
    /// Every bit that makes work is set by an atomic on this same word, so the CAS that
    /// clears the lock either sees it (and keeps the lock) or happens before it (and the
    /// setter's wakeup schedules a new drain).
    private func tryUnlockDrain() -> Bool {
        var s = state.load(ordering: .relaxed)
        while true {
            let keep = SourceState(s).hasWork
            let desired = keep ? s : s & ~SourceState.enqueued
            if keep { return false }
            let (done, now) = state.weakCompareExchange(expected: s, desired: desired, ordering: .sequentiallyConsistent)
            if done { return true }
            s = now
        }
    }

    // MARK: Description

    func debugDescription() -> String {
        let s = SourceState(state.load(ordering: .relaxed))
        var flags: [String] = []
        if s.has(SourceState.inactive) { flags.append("inactive") }
        if s.suspendCount > 0 { flags.append("suspended \(s.suspendCount)") }
        if s.has(SourceState.cancelled) { flags.append("cancelled") }
        if s.has(SourceState.pending) { flags.append("pending") }
        let target = self.target.labelString
        return "source[\(type.name)] handle = \(handle), mask = 0x\(String(mask, radix: 16)), "
            + "data = \(deliveredData.load(ordering: .relaxed)), pending = \(pendingData.load(ordering: .relaxed)), "
            + "target = \(target)\(flags.isEmpty ? "" : ", " + flags.joined(separator: ", "))"
    }
}

/// Runs a scheduled source drain; `context` is the core, carrying the drain's retain.
let sourceDrainTrampoline: DispatchFunction = { context in
    Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue().drain()
}
