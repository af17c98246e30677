import CGrandCentral

/// What each library thread runs at: the nice value of a QoS class, as libdispatch on Linux
/// gives its threads, but per item, because GrandCentral's workers serve every root.
///
/// The table (libdispatch's, read from `_dispatch_worker_thread` in the toolchain's
/// libdispatch.so and observed there as root): background and maintenance 10, utility 2,
/// default 0, user-initiated and user-interactive -2 (libdispatch on Linux serves
/// user-interactive work on its user-initiated roots), the event thread -4 (libdispatch's
/// manager thread, which runs its epoll and timers, sits on the user-interactive overcommit
/// root at -4). Overcommit and non-overcommit roots of a class run at the same value.
///
/// The rule. A worker starts at nice 0 (`gc_thread_create` resets what it inherited) and
/// remembers its nice value (`Worker.nice`); before it runs an item it compares the nice
/// value of the item's root with that (one load and a compare) and calls setpriority only
/// when they differ, so a worker that keeps serving one class makes no system call.
///
/// Privilege. Raising a thread's nice value is always allowed; lowering it needs
/// CAP_SYS_NICE or RLIMIT_NICE (`gc_nice_floor`: no thread may go below 20 - RLIMIT_NICE).
/// A worker serves every class, so it must be able to come back down from background's 10
/// to default's 0: the per-class values are used only when the floor is at or below 0
/// (root, CAP_SYS_NICE, or RLIMIT_NICE >= 20), clamped to the floor (RLIMIT_NICE 20: the
/// user-initiated classes at 0). Otherwise (an ordinary user: RLIMIT_NICE 0) every worker
/// and the event thread stay at the nice value they started at.
///
/// Rejected: raising a worker's nice value one way when it cannot come back, as libdispatch
/// does unprivileged (its background threads go to 10 and stay). Threads inherit their
/// creator's nice value, so a thread started from a background item is at 10 for good:
/// under libdispatch as an ordinary user, default and user-initiated items that first run
/// after a background one ran at nice 10 (seen). Keeping per-class threads, or a worker at
/// 10 that serves only background work and a spare thread at 0 that creates every other
/// thread, would keep the classes apart unprivileged; both change how the pool starts and
/// picks threads, and are not done.
enum ThreadPriority {
    /// A nice value that means "leave the thread as it is".
    static let unchanged = Int32.max

    /// The nice value of each QoS bucket (`RootQueues`: maintenance … user-interactive).
    static let niceByBucket: [Int32] = [10, 10, 2, 0, -2, -2]
    /// libdispatch's manager thread's value.
    static let eventThreadNice: Int32 = -4

    /// The lowest nice value this process's threads may set (read once).
    static let floor: Int32 = gc_nice_floor()

    /// Whether workers follow the table: only if a worker can come back to 0 from any
    /// value it goes to.
    static var followsClasses: Bool { floor <= 0 }

    /// The value a thread runs `nice` at here, or `unchanged`.
    static func effective(_ nice: Int32) -> Int32 {
        followsClasses ? max(nice, floor) : unchanged
    }

    /// The value each root's items run at, by `RootQueues.all` index; immortal, so a worker
    /// reads it without reference counting.
    nonisolated(unsafe) static let niceByRoot: UnsafeMutableBufferPointer<Int32> = {
        let buffer = UnsafeMutableBufferPointer<Int32>.allocate(capacity: RootQueues.bucketCount * 2)
        for i in 0..<buffer.count { buffer[i] = effective(niceByBucket[i / 2]) }
        return buffer
    }()

    /// The event thread, as it starts: libdispatch's manager value (clamped to the floor),
    /// when workers follow the classes; else it keeps what it started at.
    static func enterEventThread() {
        let nice = effective(eventThreadNice)
        if nice != unchanged { _ = gc_thread_set_nice(nice) }
    }
}
