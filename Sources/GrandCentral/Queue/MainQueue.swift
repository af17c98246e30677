import CGrandCentral
import Glibc
import Synchronization

extension DispatchQueue {
    /// The main queue: serial, drained on the main thread by `dispatch_main`.
    public static let main: DispatchQueue = {
        DispatchQueue(role: .main, label: "com.apple.main-thread", attributes: .serial,
                      target: RootQueues.queue(qos: .userInteractive, overcommit: true))
    }()
}

/// Drives the main queue. `dispatch_main` parks the main thread on `wakeups` and drains the
/// main queue whenever its wakeup (ENQUEUED) is set; the drain runs on the main thread only.
///
/// `wakeups` is a futex word that every wakeup of the main queue increments; the main
/// thread reads it before checking for work, so a wakeup between its check and its sleep
/// changes the word and the sleep returns at once.
enum MainQueueDriver {
    nonisolated(unsafe) static let wakeups: UnsafeMutablePointer<UInt32> = {
        let p = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        p.initialize(to: 0)
        return p
    }()

    static func wake() {
        _ = gc_word_add(wakeups, 1)
        gc_futex_wake(wakeups, 1)
    }

    /// `dispatch_main`: never returns.
    static func run() -> Never {
        let queue = DispatchQueue.main
        if !isMainThread() {
            clientBug("dispatch_main", "called from a thread other than the main thread")
        }
        while true {
            let seen = gc_word_load(wakeups)
            if QueueState(queue.state.load(ordering: .sequentiallyConsistent)).isEnqueued {
                drainMain(queue)
                continue
            }
            _ = gc_futex_wait(wakeups, seen, -1)
        }
    }

    /// Drains the main queue on the main thread. Its ENQUEUED bit was set by a wakeup,
    /// which makes this thread the drain owner.
    static func drainMain(_ queue: DispatchQueue) {
        HeldQueues.entering(queue, exclusive: true) {
            while true {
                while !QueueState(queue.state.load(ordering: .relaxed)).isSuspended, let node = queue.items.pop() {
                    // Syncs onto the main queue run on the main thread (`syncWaiter`), so
                    // no caller ever waits here for a hand-off.
                    assert(node.pointee.flags & ContinuationFlags.syncHandoff.rawValue == 0)
                    runContinuation(node)
                }
                if queue.tryUnlockDrain() { break }
            }
        }
    }
}
