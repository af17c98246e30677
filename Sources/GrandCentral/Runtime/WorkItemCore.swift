import Synchronization

/// What a work item is beyond its body: the one implementation of `dispatch_block_create`'s
/// blocks (GrandCentralBlocks/work_item.c holds a retained `WorkItemCoreBox` in each) and
/// of `DispatchWorkItem` (which holds a core inline). Non-copyable: a core is one item's
/// state, stored in its holder and never copied; its deinit is the holder's release.
///
/// The contract (libdispatch's, checked against the toolchain's libdispatch by
/// ctests/blocks_workitem.c):
/// - An item may run any number of times, or be waited on once and run once. Waiting
///   twice, waiting on an item that ran twice, and running an item again after a wait are
///   client bugs. A wait that times out does not count: the item may be waited on again.
/// - `cancel` keeps runs that have not started from calling the body; a running body is
///   not interrupted. A cancelled run still counts as a run and still finishes the item.
/// - The item *finishes* once: when its first run returns (or is skipped, cancelled), or,
///   if it never ran, when the core goes away (its last holder released it). A wait returns
///   and notifications are submitted when it finishes. This is `completion`, a private
///   group entered at creation and left by the finish; wait and notify are the group's.
///
/// The state word, one `UInt64`:
/// ```
/// bit 0      CANCELLED  cancel was called; never cleared
/// bit 1      WAITING    a wait is in progress (set on entry, cleared on return)
/// bit 2      WAITED     a wait returned because the item finished
/// bit 3      FINISHED   `completion` has been left (by the first finish)
/// bits 4-63  runs       runs started (cancelled ones included); 2^60 of them do not wrap
/// ```
/// It is one word, not a flag word beside a run counter, because the run-twice-and-wait
/// check is a race between a run (which adds to `runs`, then looks at WAITING/WAITED) and
/// a wait (which sets WAITING, then looks at `runs`): on two words that is a store-load
/// pattern that only sequential consistency orders. On one word every change is a
/// read-modify-write in the word's single modification order, so whichever of the two
/// comes second sees the first. Orderings: the RMWs are acquiring-and-releasing, so that a
/// `cancel` happens-before a run that reads CANCELLED; a run's effects reach a waiter
/// through `completion` (leave releases, wait acquires), not through this word.
///
/// Any thread may call any method.
struct WorkItemCore: ~Copyable, @unchecked Sendable {
    private let state = Atomic<UInt64>(0)
    private let completion = DispatchGroup()

    static let cancelled: UInt64 = 1 << 0
    static let waiting: UInt64 = 1 << 1
    static let waited: UInt64 = 1 << 2
    static let finished: UInt64 = 1 << 3
    static let runUnit: UInt64 = 1 << 4

    init() { completion.enter() }

    /// Gone (its holder was released) without having run: it never will now, so it has
    /// finished (its waiters held the holder, so none is waiting; its notifications are
    /// submitted).
    deinit { finish() }

    /// One run: checks the contract, calls `body(context)` unless cancelled, then
    /// finishes the item. `caller` names the wait in a client-bug message.
    @inline(__always)
    func run(_ body: DispatchFunction, _ context: UnsafeMutableRawPointer?, caller: StaticString) {
        run(caller: caller) { body(context) }
    }

    /// The same, for a Swift closure.
    @inline(__always)
    func run(caller: StaticString, _ body: () -> Void) {
        let old = state.wrappingAdd(Self.runUnit, ordering: .acquiringAndReleasing).oldValue
        if old >= Self.runUnit && old & (Self.waiting | Self.waited) != 0 {
            clientBug(caller, "a work item that is waited on may not run more than once")
        }
        if old & Self.cancelled == 0 { body() }
        finish()
    }

    /// Leaves `completion`, the first time only.
    @inline(__always)
    private func finish() {
        if state.bitwiseOr(Self.finished, ordering: .acquiringAndReleasing).oldValue & Self.finished == 0 {
            completion.leave()
        }
    }

    /// Waits until the item has finished, at most `timeoutNanoseconds` (-1: forever).
    /// True when it finished; false on timeout, which does not count as the one wait.
    func wait(timeoutNanoseconds: Int64, caller: StaticString) -> Bool {
        let old = state.bitwiseOr(Self.waiting, ordering: .acquiringAndReleasing).oldValue
        if old & (Self.waiting | Self.waited) != 0 {
            clientBug(caller, "a work item may not be waited on more than once")
        }
        if old >= 2 * Self.runUnit {
            clientBug(caller, "a work item that ran more than once may not be waited on")
        }
        let finished = completion.wait(timeoutNanoseconds: timeoutNanoseconds)
        // WAITED before WAITING is cleared, so a second run in between is caught.
        if finished { state.bitwiseOr(Self.waited, ordering: .acquiringAndReleasing) }
        state.bitwiseAnd(~Self.waiting, ordering: .acquiringAndReleasing)
        return finished
    }

    /// Submits `function(context)` to `queue` (as a barrier if `flags` say so) when the
    /// item has finished; at once if it already has.
    func notify(queue: DispatchQueue, function: DispatchFunction, context: UnsafeMutableRawPointer?,
                flags: ContinuationFlags) {
        completion.notify(queue: queue, function: function, context: context, flags: flags)
    }

    func cancel() { state.bitwiseOr(Self.cancelled, ordering: .acquiringAndReleasing) }

    var isCancelled: Bool { state.load(ordering: .acquiring) & Self.cancelled != 0 }
}

/// A `WorkItemCore` on the heap, for the C ABI's work-item blocks, which each hold one
/// retained (GrandCentralExports/WorkItem.swift); releasing the last reference is the
/// block's disposal.
final class WorkItemCoreBox: @unchecked Sendable {
    let core = WorkItemCore()
}
