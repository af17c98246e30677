import CGrandCentral
import Glibc

/// A thread-bound queue for a run loop (`_dispatch_runloop_root_queue_create_4CF`): serial,
/// and drained by no thread of the pool. Its owner, the thread that runs the loop, polls the
/// queue's eventfd (`descriptor`, `_dispatch_runloop_root_queue_get_port_4CF`) and calls
/// `performOne` (`_perform_4CF`) when it is readable; each call runs one item, on the
/// owner's thread, with this queue as the current queue, and says whether more are waiting.
/// Only the owner calls `performOne` (the item list has one consumer).
///
/// The drain protocol is the ordinary one (`QueueState`): the push that makes the queue
/// non-empty sets ENQUEUED, which makes the owner the drain holder, and `scheduleDrain`
/// writes the eventfd instead of putting a drain on a target. The holder keeps ENQUEUED
/// while items remain and gives it back (`tryUnlockDrain`) when the list is empty. The
/// eventfd is a hint: the owner reads (clears) it itself, as CFRunLoop does, and a spare
/// poke finds nothing to run.
///
/// A sync onto the queue (or one that targets it) parks a waiter among its items that the
/// owner runs, as the main queue does (`targetChainReachesMain`). Its target is never
/// changed and never drains it; it is the root queue only so the target chain stays whole.
final class RunLoopQueue: DispatchQueue, @unchecked Sendable {
    /// Non-blocking, close-on-exec eventfd; closed when the queue goes away.
    let descriptor: Int32

    init?(label: UnsafePointer<CChar>?) {
        let fd = gc_eventfd_create()
        if fd < 0 { return nil }
        descriptor = fd
        super.init(role: .runloop, label: label, attributes: .serial,
                   target: RootQueues.queue(qos: .default, overcommit: true))
    }

    deinit { close(descriptor) }

    /// `_dispatch_runloop_root_queue_wakeup_4CF`: makes the descriptor readable.
    func poke() { _ = gc_eventfd_signal(descriptor) }

    /// `_dispatch_runloop_root_queue_perform_4CF`: runs the first item, if the queue holds
    /// one and is not suspended; true when more items are waiting.
    func performOne() -> Bool {
        if !QueueState(state.load(ordering: .sequentiallyConsistent)).isEnqueued { return false }
        if QueueState(state.load(ordering: .relaxed)).isSuspended {
            // Give the drain back (a suspended queue keeps it clear), so the resume's
            // wakeup takes it again and pokes the descriptor.
            _ = tryUnlockDrain()
            return false
        }
        if let node = items.pop() {
            HeldQueues.entering(self, exclusive: true) { runContinuation(node) }
        }
        if !items.isEmpty { return true }
        // The list looked empty: give the drain back, unless a push came in between (then
        // ENQUEUED is ours again and the caller runs the next item on its next call).
        return !tryUnlockDrain()
    }
}
