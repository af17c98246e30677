import CGrandCentral
import Glibc
import Synchronization

/// What the library's threads are called, so `top -H`, `ps -L`, gdb's `info threads` and
/// `perf` tell what each is doing. The kernel keeps 15 characters of a thread's name.
///
/// - `gc.event`: the event thread (timers, sources, I/O readiness; `EventLoop`).
/// - `gc.monitor`: the starvation monitor (`StarvationMonitor`).
/// - `gc.worker`: a pool worker that has not yet parked.
/// - `gc.idle.<root>`: a worker parked (or about to park) after running work of `<root>`,
///   the QoS bucket of the root queue its last item came from: `maint`, `bg`, `utility`,
///   `default`, `uinit` (user-initiated), `uinter` (user-interactive). Both flavours of a
///   bucket (overcommit or not) share the name.
/// - The queue's label, truncated to 15 characters: a worker that has been running one
///   queue's work (one drain of a serial or concurrent queue, or one item of a concurrent
///   queue's) for more than `nameAfter` (~3 ms). An unlabelled queue gives `gc.busy.<root>`.
/// - `gc.busy.<root>`: a worker that has been running one item submitted straight to a
///   global queue for that long.
///
/// Who renames, and when. Renaming is a write to /proc/self/task/<tid>/comm (a few µs), so
/// it never happens per item or per drain:
/// - The monitor, which already samples the workers every tick while it watches, renames a
///   worker it sees on the same root item (`Worker.itemsRun`) for `nameAfter`. While any
///   worker is busy it keeps watching (at `namingTick`, 4 ms, when there is nothing to
///   starve; a producer's poke brings it back to 1 ms ticks), and a worker that wakes from
///   parking pokes it if it sleeps.
/// - A worker renames itself when it parks, and only if its name is not already its idle
///   name: a worker that parks and wakes over and over does not rename.
/// Both go through the worker's `nameLock` (cold paths only: parking, and the monitor's
/// rename), so the monitor never labels a worker that has already moved on and parked.
///
/// What a worker runs. The drain of a queue and a concurrent queue's item (the places that
/// enter a queue, `HeldQueues.entering`) store the queue in `Worker.runningQueue` (one
/// releasing store on entry and one on exit, a plain store on x86, nothing else on the hot
/// path; the monitor's acquiring load then sees the queue's label as its creator wrote it).
/// The queue is alive while it is stored there (the drain's retain, or the concurrent
/// queue's self-reference), but the monitor reads it from another thread: it reads the
/// label under `labelLock` with `labelReading` set, and a queue's deinit, before it frees
/// the label, takes `labelLock` if `labelReading` is set. The worker's clearing store and the deinit's look at the flag,
/// against the monitor's set and its look at `runningQueue`, are a Dekker pair: each side
/// puts a sequentially consistent fence between its store and its load, so either the
/// deinit waits for the monitor, or the monitor sees the cleared slot.
///
/// Rejected: renaming at every drain (the name would always be exact, but a rename is a
/// system call, and a serial queue drained a million times a second would pay it each time);
/// naming workers after their root alone (`top -H` would show twenty `gc.busy.default`).
enum ThreadNames {
    static let event = "gc.event"
    static let monitor = "gc.monitor"
    static let worker = "gc.worker"
    /// Short names of the QoS buckets, by bucket (`RootQueues`): "gc.idle." + 7 fits.
    static let rootNames = ["maint", "bg", "utility", "default", "uinit", "uinter"]
    /// How long a worker runs one root item before the monitor names it after it.
    static let nameAfter: Int64 = 3_000_000

    static func idleName(bucket: Int) -> String { "gc.idle." + rootNames[bucket] }
    static func busyName(rootIndex: Int) -> String { "gc.busy." + rootNames[rootIndex / 2] }

    /// Our own lock, not `Mutex` (ThreadSanitizer cannot see the toolchain's Mutex).
    static let labelLock = LabelLock()
    /// Set while the monitor reads a running queue's label; see the type's comment.
    static let labelReading = Atomic<Bool>(false)

    /// The name for a worker running `worker`'s current root item (monitor only).
    static func busyName(for worker: Worker) -> String {
        let root = worker.rootIndex.load(ordering: .relaxed)
        return labelLock.lock.withLock { () -> String in
            labelReading.store(true, ordering: .relaxed)
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            defer { labelReading.store(false, ordering: .relaxed) }
            // acquiring, with the worker's releasing stores: the queue's label was written
            // before the worker took the queue, so the monitor sees it too.
            let raw = worker.runningQueue.load(ordering: .acquiring)
            guard raw != 0, let queue = UnsafeRawPointer(bitPattern: raw) else { return busyName(rootIndex: root) }
            return Unmanaged<DispatchQueue>.fromOpaque(queue)._withUnsafeGuaranteedRef { q in
                guard let label = q.labelPointer, label.pointee != 0 else { return busyName(rootIndex: root) }
                // Copy at most 15 bytes: the label may be long, the name cannot be.
                var bytes: [UInt8] = []
                var p = UnsafeRawPointer(label).assumingMemoryBound(to: UInt8.self)
                while bytes.count < 15 && p.pointee != 0 { bytes.append(p.pointee); p += 1 }
                return String(decoding: bytes, as: UTF8.self)
            }
        }
    }

    /// A queue is about to free its label: wait out a monitor that may be reading it.
    @inline(__always)
    static func queueWillFree() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if labelReading.load(ordering: .relaxed) { labelLock.lock.withLock {} }
    }

    /// The current thread is entering `queue` (a drain, or a concurrent queue's item):
    /// record it for the monitor if this is a pool worker. Returns what to restore.
    @inline(__always)
    static func enter(_ queue: DispatchQueue) -> UInt {
        guard let raw = gc_thread_self().pointee.worker else { return 0 }
        let worker = Unmanaged<Worker>.fromOpaque(raw)
        return worker._withUnsafeGuaranteedRef {
            let previous = $0.runningQueue.load(ordering: .relaxed)
            $0.runningQueue.store(UInt(bitPattern: Unmanaged.passUnretained(queue).toOpaque()), ordering: .releasing)
            return previous
        }
    }

    /// Pairs with `enter`: puts back the queue recorded before (usually none).
    @inline(__always)
    static func leave(_ previous: UInt) {
        guard let raw = gc_thread_self().pointee.worker else { return }
        Unmanaged<Worker>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.runningQueue.store(previous, ordering: .releasing) }
    }
}

/// The name a worker has, as far as the library set it (`Worker.nameLock`).
enum WorkerName: Equatable {
    /// `gc.worker`, from its creation.
    case initial
    /// `gc.idle.<root>`, root index as in `RootQueues.all`'s bucket.
    case idle(bucket: Int)
    /// Named by the monitor for the root item numbered `item` (`Worker.itemsRun`).
    case busy(item: UInt64)
}

/// A home for a process-wide `SpinLock` (a non-copyable struct lives inside a class).
final class LabelLock: Sendable {
    let lock = SpinLock()
}
