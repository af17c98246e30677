import CGrandCentral
import Glibc
import Synchronization

extension DispatchQueue {
    /// The queue whose work runs on the main thread, in order.
    public class var main: DispatchQueue { mainQueue }
}

/// The main queue: serial, drained on the main thread (see `MainQueueDriver`). Its target
/// is the default-QoS overcommit root, the one libdispatch gives it (and reports in
/// `dispatch_debug`); its items never run there, the main thread drains it.
let mainQueue = DispatchQueue(role: .main, label: "com.apple.main-thread", attributes: .serial,
                              target: RootQueues.queue(qos: .default, overcommit: true))

/// Drives the main queue: whoever owns the main thread must drain it.
///
/// A wakeup of the main queue (its ENQUEUED bit set) makes the main thread the drain owner.
/// Who runs the main thread decides how that drain happens:
///
/// - **`dispatchMain()` / `dispatch_main()` in a process without libdispatch** (every C
///   program linked with libgrandcentral.so): the main thread parks on `wakeups` and drains
///   the main queue itself (`run`).
/// - **A process that has the toolchain's libdispatch loaded** (Swift programs: the Swift
///   concurrency runtime and Foundation both link it). There the main thread belongs to
///   libdispatch's main queue: the concurrency runtime's main executor (an `async` main,
///   `@MainActor` code) and Foundation's `RunLoop.main` both drain it. So a wakeup hands
///   the drain over as one `dispatch_async_f(&_dispatch_main_q, nil, drainOnHost)`, and our
///   main queue's items run in order among theirs. `dispatchMain()` there calls libdispatch's
///   own `dispatch_main()`, so work on both main queues keeps running, as with Dispatch
///   (on Linux that retires the main thread and libdispatch drains its main queue on a
///   stand-in thread; our main queue's items follow it there).
///
/// - **A run loop that owns the main thread** (Foundation's `CFRunLoop`, or any event loop
///   that uses libdispatch's `_4CF` hooks) in a process where GrandCentral *is* libdispatch
///   (the drop-in, `lib/grandcentral/libdispatch.so`): the loop polls `runLoopHandle()`, an
///   eventfd that a wakeup writes while the main thread is not parked in `run`, and calls
///   `runLoopDrain()` when it is readable. The loop reads (clears) the eventfd itself, as
///   CFRunLoop does with the eventfd libdispatch gives it.
///
/// libdispatch is looked up at run time (`dlopen("libdispatch.so", RTLD_NOLOAD)` and
/// `dlsym` on that handle), never linked or loaded by us: a C program keeps hard rule 1.
/// The lookup finds GrandCentral itself when it was loaded as the drop-in (the soname is
/// the same); `HostMainQueue.find` recognises its own image and answers "no other
/// libdispatch", so `dispatch_main` parks here instead of calling itself forever.
/// Rejected: always parking our own main thread (an `async` main or a run loop owns it, so
/// our main queue would never run); polling from a timer (latency, and off the main thread);
/// linking libdispatch (forbidden for the C library).
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

    /// True once the main thread parks in our own `run` loop: wakeups only need the futex.
    /// Set once by the main thread; acquire/release so a waker that sees it also sees the
    /// loop's first check of the queue.
    static let isParked = Atomic<Bool>(false)

    /// True while a drain of the main queue runs (main thread, or libdispatch's stand-in for
    /// it): a host drain that arrives inside one (an item spinning a run loop) leaves the
    /// items to the outer drain instead of unlocking the queue twice. Only touched by the
    /// thread that drains the main queue.
    nonisolated(unsafe) static var isDraining = false

    static func wake() {
        if isParked.load(ordering: .acquiring) {
            _ = gc_word_add(wakeups, 1)
            gc_futex_wake(wakeups, 1)
            return
        }
        if let host = HostMainQueue.find() {
            host.async(hostDrainTrampoline)
        } else {
            // Nobody parks in `run` yet: count the wakeup for a later `run`, and tell a run
            // loop that polls the handle.
            _ = gc_word_add(wakeups, 1)
            gc_futex_wake(wakeups, 1)
            pokeRunLoop()
        }
    }

    // MARK: The run loop's hooks (`_dispatch_get_main_queue_handle_4CF`, `_callback_4CF`)

    /// The eventfd a run loop polls, or -1 until one asks for it. Created once
    /// (`handleLock`), never closed. sequentiallyConsistent, with the main queue's state:
    /// a waker reads the handle after setting ENQUEUED, the creator reads ENQUEUED after
    /// storing the handle, so a wakeup racing the creation is seen by one of them.
    static let handle = Atomic<Int32>(-1)
    private static let handleLock = SpinLock()

    /// `_dispatch_get_main_queue_handle_4CF`: the eventfd (non-blocking, close-on-exec),
    /// readable while main-queue work is waiting for the run loop.
    static func runLoopHandle() -> Int32 {
        let existing = handle.load(ordering: .sequentiallyConsistent)
        if existing >= 0 { return existing }
        handleLock.lock()
        defer { handleLock.unlock() }
        if handle.load(ordering: .relaxed) >= 0 { return handle.load(ordering: .relaxed) }
        // No error channel here; libdispatch crashes too when it cannot make the eventfd.
        let fd = gc_eventfd_create()
        if fd < 0 {
            let line = "GrandCentral: _dispatch_get_main_queue_handle_4CF: eventfd failed: \(String(cString: strerror(-fd)))\n"
            line.withCString { gc_write_stderr($0) }
            abort()
        }
        handle.store(fd, ordering: .sequentiallyConsistent)
        // Work that arrived before the run loop asked waits for this first poke.
        if QueueState(DispatchQueue.main.state.load(ordering: .sequentiallyConsistent)).isEnqueued {
            pokeRunLoop()
        }
        return fd
    }

    /// Makes the run loop's handle readable, if a run loop asked for one and the main thread
    /// is not parked in `run` (which drains without it).
    static func pokeRunLoop() {
        let fd = handle.load(ordering: .sequentiallyConsistent)
        if fd < 0 || isParked.load(ordering: .acquiring) { return }
        gc_eventfd_signal(fd)
    }

    /// `_dispatch_main_queue_callback_4CF`: the run loop's turn to drain the main queue, on
    /// the main thread. Runs the items that were queued when it began, in order, each once,
    /// with the main queue as the current queue; items queued meanwhile wait for the next
    /// turn (the handle is made readable again), so a main-queue item that queues another
    /// cannot starve the run loop's timers and sources. Called inside a drain (an item that
    /// runs a nested run loop), it returns at once and leaves the items to the outer drain.
    static func runLoopDrain() {
        if !isMainThread() {
            clientBug("_dispatch_main_queue_callback_4CF", "called from a thread other than the main thread")
        }
        let queue = DispatchQueue.main
        if isDraining || isParked.load(ordering: .acquiring) { return }
        if !QueueState(queue.state.load(ordering: .sequentiallyConsistent)).isEnqueued { return }
        isDraining = true
        defer { isDraining = false }
        let last = queue.items.lastNode
        var more = false
        HeldQueues.entering(queue, exclusive: true) {
            while !QueueState(queue.state.load(ordering: .relaxed)).isSuspended, let node = queue.items.pop() {
                assert(node.pointee.flags & ContinuationFlags.syncHandoff.rawValue == 0)
                let wasLast = UInt(bitPattern: node) == last
                runContinuation(node)
                if wasLast { break }
            }
            more = !queue.tryUnlockDrain()
        }
        // Still the drain owner (ENQUEUED kept): nobody else will wake the run loop.
        if more { pokeRunLoop() }
    }

    /// `dispatchMain()` / `dispatch_main`: never returns.
    static func run() -> Never {
        let queue = DispatchQueue.main
        if !isMainThread() {
            clientBug("dispatch_main", "called from a thread other than the main thread")
        }
        if let host = HostMainQueue.find() {
            // libdispatch owns the main thread from here; anything already waiting on our
            // main queue gets one handed-over drain (a spare one finds nothing to do).
            host.async(hostDrainTrampoline)
            host.dispatchMain()
        }
        isParked.store(true, ordering: .releasing)
        while true {
            let seen = gc_word_load(wakeups)
            if QueueState(queue.state.load(ordering: .sequentiallyConsistent)).isEnqueued {
                drainMain(queue)
                continue
            }
            _ = gc_futex_wait(wakeups, seen, -1)
        }
    }

    /// A handed-over drain, run by libdispatch's main queue. Only the main queue's owner
    /// thread runs these, one at a time, so checking ENQUEUED first is enough: a spare
    /// drain (the queue was drained by an earlier one) finds it clear and does nothing.
    static func drainOnHost() {
        let queue = DispatchQueue.main
        if isDraining { return }
        if QueueState(queue.state.load(ordering: .sequentiallyConsistent)).isEnqueued {
            drainMain(queue)
        }
    }

    /// Drains the main queue on the thread that owns it. Its ENQUEUED bit was set by a
    /// wakeup, which makes this thread the drain owner.
    static func drainMain(_ queue: DispatchQueue) {
        isDraining = true
        defer { isDraining = false }
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

/// The trampoline libdispatch's main queue runs for a handed-over drain.
private let hostDrainTrampoline: DispatchFunction = { _ in MainQueueDriver.drainOnHost() }

/// The toolchain's libdispatch, when something else already loaded it into this process:
/// its main queue and the two functions the hand-over needs, found with `dlsym`.
struct HostMainQueue {
    typealias AsyncF = @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer?, DispatchFunction) -> Void
    typealias Main = @convention(c) () -> Void

    let mainQueue: UnsafeMutableRawPointer
    let asyncF: AsyncF
    let main: Main

    /// Cached once found (libdispatch is never unloaded: we keep the handle). Until then
    /// each call asks the dynamic linker again, so a libdispatch that arrives later is seen.
    nonisolated(unsafe) private static var found: HostMainQueue?
    private static let lookup = Mutex<Void>(())

    static func find() -> HostMainQueue? {
        if let found = lookupFound() { return found }
        if isSelf.load(ordering: .relaxed) { return nil }
        return lookup.withLock { _ -> HostMainQueue? in
            if let found = lookupFound() { return found }
            if isSelf.load(ordering: .relaxed) { return nil }
            guard let handle = dlopen("libdispatch.so", RTLD_LAZY | RTLD_NOLOAD),
                  let queue = dlsym(handle, "_dispatch_main_q"),
                  let asyncF = dlsym(handle, "dispatch_async_f"),
                  let main = dlsym(handle, "dispatch_main") else { return nil }
            if isInThisImage(asyncF) {
                // GrandCentral is the process's libdispatch (the drop-in): there is no other
                // runtime to hand anything to. A libdispatch.so loaded later would have the
                // same soname and resolve to this one, so the answer is final.
                isSelf.store(true, ordering: .relaxed)
                return nil
            }
            DebugLog.library("the toolchain's libdispatch is loaded too (\(imagePath(asyncF))): two runtimes; GrandCentral's main queue is drained through libdispatch's")
            let host = HostMainQueue(mainQueue: queue, asyncF: unsafeBitCast(asyncF, to: AsyncF.self),
                                     main: unsafeBitCast(main, to: Main.self))
            publish(host)
            return host
        }
    }

    /// True once `find` saw that "libdispatch.so" is this image; written under `lookup`, set
    /// once and never cleared, so a read without the lock may only miss it (and then look again).
    private static let isSelf = Atomic<Bool>(false)

    /// Whether `symbol` lies in the image this code was loaded from (the drop-in finds its
    /// own `dispatch_async_f` under libdispatch's soname).
    private static func isInThisImage(_ symbol: UnsafeMutableRawPointer) -> Bool {
        gc_is_this_image(symbol) != 0
    }

    private static func imagePath(_ symbol: UnsafeMutableRawPointer) -> String {
        String(cString: gc_image_path(symbol))
    }

    /// `found` is written once under `lookup` and read without it; the flag's release/acquire
    /// orders the write before any lock-free read.
    private static let isFound = Atomic<Bool>(false)
    private static func lookupFound() -> HostMainQueue? {
        isFound.load(ordering: .acquiring) ? found : nil
    }
    private static func publish(_ host: HostMainQueue) {
        found = host
        isFound.store(true, ordering: .releasing)
    }

    /// `dispatch_async_f` onto libdispatch's main queue.
    func async(_ function: DispatchFunction) { asyncF(mainQueue, nil, function) }

    /// libdispatch's `dispatch_main()`, which does not return.
    func dispatchMain() -> Never {
        main()
        fatalError("libdispatch's dispatch_main returned")
    }
}
