import CGrandCentral

/// The library's own waits (dispatch_sync, semaphore and group waits, dispatch_block_wait)
/// announce themselves to the thread pool, so that a pool worker about to park can be
/// replaced at once instead of after the starvation monitor notices.
///
/// Contract: every `enter()` is paired with one `leave()` on the same thread. Cheap when
/// the caller is not a pool worker (one thread-local load).
enum BlockingRegion {
    @inline(__always)
    static func enter() {
        if let worker = gc_thread_self().pointee.worker {
            ThreadPool.workerWillBlock(worker)
        }
    }

    @inline(__always)
    static func leave() {
        if let worker = gc_thread_self().pointee.worker {
            ThreadPool.workerDidUnblock(worker)
        }
    }
}
