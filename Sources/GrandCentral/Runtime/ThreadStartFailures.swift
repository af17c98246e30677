import CGrandCentral
import Glibc
import Synchronization

/// What the library does when it cannot start a thread (pthread_create fails, normally with
/// EAGAIN: RLIMIT_NPROC, a cgroup's pids.max, kernel memory). Such a failure is never fatal
/// and never makes the submitting thread sleep:
///
/// - The event thread is started before the first worker (`ThreadPool.startWorker` asks
///   for it), so a process that can have only one thread more than it has gets the event
///   thread, and timers keep working. A failed start of the event thread is retried by
///   every later wakeup request (a timer armed, a source registered) and by the first
///   worker start after it; a request that finds no event thread only leaves its command
///   in the inbox, which the thread empties when it starts.
/// - A failed worker start opens an episode (`since`) and wakes the event thread, which
///   then retries the start itself with backoff (1 ms doubling to 100 ms: its epoll_wait
///   timeout) for as long as work waits. While no worker lives at all, the event thread
///   runs the waiting work itself, up to `itemsPerPass` items between two looks at its
///   descriptors, so the work still runs (late timers are the price: an item that runs long
///   on the event thread delays them). The episode ends when a start succeeds or no work
///   waits.
/// - An episode that lasts `reportAfter` (3 s) prints one line on stderr, once per episode:
///   `GrandCentral: cannot start a worker thread (pthread_create: <error>); N items
///   waiting`, from whichever thread next fails a start or from the event thread (with no
///   thread at all, the next submission that asks for a worker prints it). N counts
///   the items waiting on the overcommit roots and one for each non-empty global queue
///   (their roots keep no count), so it is a lower bound.
///
/// Rejected: sleeping and retrying in the submitting thread (libdispatch's way: a
/// `dispatch_async` then blocks its caller for as long as threads cannot be had), and a
/// fatal error (today's limit may be gone in a millisecond: a process that forked a lot).
///
/// The counters are atomics, any thread; relaxed except where said: they decide when to
/// retry and when to speak, never publish data.
final class ThreadStartFailures: @unchecked Sendable {
    static let shared = ThreadStartFailures()

    static let reportAfter: UInt64 = 3_000_000_000
    static let itemsPerPass = 16

    /// Uptime of the first failed start of the current episode; 0 when there is none.
    let since = Atomic<UInt64>(0)
    /// The last pthread_create error (a positive errno).
    let lastError = Atomic<Int32>(0)
    /// The episode's line was printed.
    let reported = Atomic<Bool>(false)

    /// A worker start failed with `error`. Any thread; cold.
    func workerStartFailed(_ error: Int32) {
        lastError.store(error, ordering: .relaxed)
        let now = gc_uptime_ns()
        // Sequentially consistent: the episode, then `requestWakeup`'s look at the event
        // loop's `wakeupPending`, against the loop closing a polling window (it clears the
        // flag, then looks at `since`: EventLoopDescriptors.swift, `descriptorPollTimeout`).
        _ = since.compareExchange(expected: 0, desired: now, ordering: .sequentiallyConsistent)
        reportIfLong(now: now)
        // The event thread retries (or runs the work); starting it is retried here too.
        EventLoop.shared.requestWakeup()
    }

    /// Whether an episode is open.
    var isOpen: Bool { since.load(ordering: .relaxed) != 0 }

    /// Ends the episode: a worker started, or no work waits.
    func close() {
        if since.load(ordering: .relaxed) == 0 { return }
        since.store(0, ordering: .relaxed)
        reported.store(false, ordering: .relaxed)
    }

    /// Prints the episode's line once it has lasted `reportAfter`.
    func reportIfLong(now: UInt64) {
        let start = since.load(ordering: .relaxed)
        if start == 0 || now &- start < ThreadStartFailures.reportAfter { return }
        if reported.exchange(true, ordering: .relaxed) { return }
        var waiting = 0
        for root in RootQueues.all {
            if root.overcommit { waiting += root.pendingCount } else if !root.isEmptyRoot { waiting += 1 }
        }
        let error = String(cString: strerror(lastError.load(ordering: .relaxed)))
        let line = "GrandCentral: cannot start a worker thread (pthread_create: \(error)); "
            + "\(waiting) item\(waiting == 1 ? "" : "s") waiting\n"
        line.withCString { gc_write_stderr($0) }
    }
}

extension EventLoop {
    /// Event thread, each pass while an episode is open: retries a worker start, or runs
    /// waiting work itself while no worker lives. Returns the epoll_wait timeout for the
    /// next pass (-1: no episode, wait for events only).
    func serveWhileWorkersCannotStart(backoff: inout Int32) -> Int32 {
        let failures = ThreadStartFailures.shared
        guard failures.isOpen else {
            backoff = 1
            return -1
        }
        let pool = ThreadPool.shared
        if !pool.hasWork() || pool.startWorker(.workQueued) {
            failures.close()
            backoff = 1
            return -1
        }
        failures.reportIfLong(now: gc_uptime_ns())
        if pool.threads.load(ordering: .relaxed) == 0 {
            // No worker at all: the work runs here, a few items per pass.
            var ran = 0
            while ran < ThreadStartFailures.itemsPerPass, let node = pool.takeWorkWithoutWorker() {
                runContinuation(node)
                ran += 1
            }
            if ran > 0 { return 0 }
        }
        let timeout = backoff
        backoff = min(backoff * 2, 100)
        return timeout
    }
}
