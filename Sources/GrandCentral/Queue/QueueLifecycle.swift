import CGrandCentral
import Synchronization

// Suspension, activation and retargeting of queues.

extension DispatchQueue {
    /// `dispatch_suspend`: new items are held back; the running one finishes.
    final func suspendQueue() {
        if isGlobal { return }
        // sequentiallyConsistent: ordered before the suspender's later pushes (their tail
        // exchange), so a drain's check after its pop (drainSerial) and `wakeup`'s load see
        // it; and against a source's merge (its PENDING store) read by the source drain's
        // `targetChainIsSuspended`.
        state.wrappingAdd(QueueState.suspendUnit, ordering: .sequentiallyConsistent)
    }

    /// `dispatch_resume`.
    final func resumeQueue(caller: StaticString) {
        if isGlobal { return }
        var s = state.load(ordering: .relaxed)
        while true {
            let q = QueueState(s)
            if q.suspendCount == 0 {
                if q.isInactive {
                    // libdispatch: resuming an inactive object activates it.
                    activateQueue()
                    return
                }
                clientBug(caller, "over-resume of an object that is not suspended")
            }
            // sequentiallyConsistent: the resume, then `wakeup`'s load of ENQUEUED, against a
            // drain's unlock CAS, then its recheck of the suspend count (tryUnlockDrain): one
            // of the two sees the other, so a queue resumed with items is drained.
            let (done, now) = state.weakCompareExchange(expected: s, desired: s - QueueState.suspendUnit,
                                                        ordering: .sequentiallyConsistent)
            if done { break }
            s = now
        }
        wakeup()
    }

    /// `dispatch_activate`: an inactive queue starts running; a no-op on an active one.
    final func activateQueue() {
        if isGlobal { return }
        // sequentiallyConsistent: pairs with tryUnlockDrain's recheck, as the resume does.
        let old = state.bitwiseAnd(~QueueState.inactive, ordering: .sequentiallyConsistent).oldValue
        if old & QueueState.inactive != 0 { wakeup() }
    }

    /// `dispatch_set_target_queue`. Allowed any time, as in libdispatch; the change is
    /// seen by the next wakeup. The old target stays retained until this queue goes away,
    /// since a producer may be pushing a drain node onto it right now (a root queue needs
    /// no reference: it lives as long as the process).
    final func setTargetQueue(_ newTarget: DispatchQueue?, caller: StaticString) {
        if isGlobal { return }
        if role == .runloop { clientBug(caller, "the target of a run loop's queue cannot be changed") }
        let target = newTarget ?? RootQueues.queue(qos: qosLevel, overcommit: role == .serial)
        // Walked without retains: each queue's target is kept alive by the queue below it
        // (a replaced one is parked in that queue's `retiredTargets`), and `target` by us.
        let me = Unmanaged.passUnretained(self).toOpaque()
        var ancestor: Unmanaged<DispatchQueue>? = Unmanaged.passUnretained(target)
        while let a = ancestor {
            if a.toOpaque() == me { clientBug(caller, "setting the target queue would create a cycle") }
            ancestor = a._withUnsafeGuaranteedRef { $0.unmanagedTarget }
        }
        let bits = UInt(bitPattern: Unmanaged.passRetained(target).toOpaque())
        // Releasing: pairs with the acquiring loads of `targetBits` (`unmanagedTarget`,
        // `targetQueue`), which then see the new target's retain. Acquiring: pairs with the
        // previous exchange's release, so the old value's retain is ours to park.
        let old = targetBits.exchange(bits, ordering: .acquiringAndReleasing)
        if old != 0 {
            let previous = Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: old)!).takeRetainedValue()
            // A root queue lives as long as the process (`RootQueues.all` holds it), so a
            // thread still pushing onto it as our old target needs no parked reference (and
            // a queue created inactive and retargeted, the usual case, allocates nothing).
            if previous.role != .root { specificsLock.withLock { retiredTargets.append(previous) } }
        }
    }

    /// `dispatch_queue_set_width` (private SPI): a positive width, or one of the CPU-count
    /// constants (-1 active CPUs, -2 physical, -3 logical).
    final func setWidth(_ requested: Int) {
        if role == .root || role == .main || role == .runloop { return }
        let resolved: Int
        switch requested {
        case -1: resolved = ThreadPool.shared.activeCPUs
        case -2: resolved = Int(gc_physical_cpu_count())
        case -3: resolved = Int(gc_logical_cpu_count())
        default: resolved = requested
        }
        let w = UInt32(min(max(resolved, 1), Int(DispatchQueue.maximumWidth)))
        // As in libdispatch, the change is a barrier: it takes effect when nothing
        // submitted before it is running, so a drain never sees the width change under
        // items in flight.
        // Releasing: pairs with the acquiring loads in `drain` and `syncRelease`. A drain
        // that misses it still runs the barrier below in serial mode, which is exclusive.
        usesWidth.store(true, ordering: .releasing)
        let change = Unmanaged.passRetained(WidthChange(queue: self, width: w)).toOpaque()
        enqueue(setWidthTrampoline, change, .barrier)
    }

    final func checkReleasable() {
        // Acquiring: pairs with the suspend/resume/activate RMWs (sequentially consistent)
        // that the releasing client made before it; only their counts are read.
        let s = QueueState(state.load(ordering: .acquiring))
        if s.isInactive { clientBug("dispatch_release", "release of an inactive object") }
        if s.suspendCount > 0 { clientBug("dispatch_release", "release of a suspended object") }
    }

    /// `queue[0x…] = { label, refcount, width, suspended, inactive, running, target }`
    /// (DispatchObject's "Description"). width: `serial`, `concurrent` (created so, and the
    /// root queues), or the number a `dispatch_queue_set_width` gave a serial queue; running:
    /// items in flight (a concurrent queue's); target: the target's label, `none` for a root.
    final func queueDebugDescription() -> String {
        let s = QueueState(state.load(ordering: .relaxed))
        let widthText: String
        switch role {
        case .serial, .main, .runloop: widthText = isSerial ? "serial" : "\(width.load(ordering: .relaxed))"
        case .concurrent, .root: widthText = "concurrent"
        }
        let target = targetQueue.map { DispatchObject.quoted($0.labelString) } ?? "none"
        return describe([
            ("label", DispatchObject.quoted(labelString)),
            ("refcount", debugRefcount),
            ("width", widthText),
            ("suspended", "\(s.suspendCount)"),
            ("inactive", "\(s.isInactive)"),
            ("running", "\(s.inFlight)"),
            ("target", target),
        ])
    }
}

/// A pending `dispatch_queue_set_width`.
private final class WidthChange {
    unowned(unsafe) let queue: DispatchQueue  // alive: the change runs as one of its items
    let width: UInt32
    init(queue: DispatchQueue, width: UInt32) {
        self.queue = queue
        self.width = width
    }
}

/// Runs as a barrier on the queue whose width changes.
private let setWidthTrampoline: DispatchFunction = { context in
    let change = Unmanaged<WidthChange>.fromOpaque(context!).takeRetainedValue()
    // Releasing, though every reader loads `width` relaxed: what orders this store before
    // their loads is the drain lock this barrier runs under. The drain gives it up with
    // tryUnlockDrain's CAS on `state`; the next drain, and a sync caller's
    // `trySyncAcquire`, read `state` (acquiring or stronger) before they read the width.
    change.queue.width.store(change.width, ordering: .releasing)
}
