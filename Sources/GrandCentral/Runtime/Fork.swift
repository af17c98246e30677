import CGrandCentral
import Synchronization

/// Dispatch in the child of a fork.
///
/// fork() copies the calling thread only. In the child of a process that had started
/// dispatch threads, the pool's counts, the root queues, the main queue and the event loop
/// all describe threads that do not exist there: libdispatch on Linux leaves them so, and a
/// child that uses dispatch hangs or crashes. GrandCentral's pthread_atfork child handler
/// (CGrandCentral/fork.c, registered with the first thread) calls `childAfterFork`, which
/// makes the child a process that has not used dispatch yet:
///
/// - the thread pool has no workers and the starvation monitor no thread; the next item
///   starts threads of the child's own;
/// - the root queues and the main queue are empty and idle: the items pending in them are
///   the parent's work, and the parent runs them; the child never does (nor frees them);
/// - the event loop is forgotten and its descriptors closed (they are shared with the
///   parent's loop); the next timer, dispatch_after or source creates a new loop and thread;
/// - the work-item depot is empty and unlocked (a parent thread may have held its lock).
///
/// The handler only stores and closes descriptors: no lock is taken, no memory allocated, no
/// thread started, so a child that calls only async-signal-safe functions and then `_exit`
/// or `exec` is never blocked, and does not become multithreaded.
///
/// What stays the parent's: every queue, source, group or I/O channel that had work pending,
/// a drain running or a registration with the event loop at the fork; their state describes
/// the parent's threads, and the child must not use them (a timer source armed in the parent
/// never fires in the child; a serial queue that was running an item stays busy). Objects
/// that were idle (a created queue with nothing pending) work in the child. Forking from a
/// dispatch worker thread (inside a work item) is not supported: the child's one thread would
/// go on as a worker of the parent's pool. Signal sources: the parent's handlers forward
/// watched signals to the parent's event thread, which is not in the child.
enum Fork {
    /// Registers `childAfterFork` as the handler fork.c calls in the child.
    static func install() {
        gc_fork_set_child_hook { Fork.childAfterFork() }
    }

    static func childAfterFork() {
        let pool = ThreadPool.shared
        pool.resetInForkChild()
        for root in RootQueues.all {
            forget(root)
            root.forgetInForkChild()
        }
        forget(mainQueue)
        MainQueueDriver.isParked.store(false, ordering: .relaxed)
        MainQueueDriver.isDraining = false
        EventLoop.forgetInForkChild()
        ContinuationDepot.shared.forgetInForkChild()
    }

    private static func forget(_ queue: DispatchQueue) {
        queue.items.forgetInForkChild()
        queue.pendingHead.store(0, ordering: .relaxed)
        queue.state.store(0, ordering: .relaxed)   // idle: not enqueued, nothing in flight
    }
}
