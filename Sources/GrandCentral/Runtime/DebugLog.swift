import CGrandCentral
import Glibc

/// `GRANDCENTRAL_DEBUG`: one line on stderr per decision of the thread pool and per
/// re-arm of a timerfd, for a user who wonders why the process has the threads it has, or
/// when the event thread wakes up.
///
/// The switch. The variable is read once, by `ThreadPool.init` and `EventLoop.init` (the
/// first of them to run), into `enabled`; each of them copies it into a stored `let debug`,
/// so a decision point pays one predictable branch on a field of an object it already
/// holds, and nothing on the per-item paths (a worker taking an item, a push that finds an
/// idle worker) ever looks at it. Set and not `0` turns it on; unset, empty or `0` leaves
/// it off, and the library then writes nothing.
///
/// The lines. Each is built whole, then written with one write(2) on descriptor 2 (no stdio
/// buffer shared between threads, so lines from different threads never interleave: a
/// write of less than PIPE_BUF bytes to a pipe is atomic, and the lines are far shorter).
/// Every line starts `GrandCentral: debug: ` and then the area, `pool: ` or `timer: `; the
/// rest is for people, not parsers (the README shows a sample). Root queues are named as
/// the workers' thread names name them (`ThreadNames.rootNames`), `.overcommit` added for
/// the overcommit flavour: `default.overcommit`.
///
/// Rejected: reading the variable at each decision (a getenv walks the environment, and a
/// decision point such as `workAvailableNoIdleWorker` runs often under load); a global
/// `static let` read at each decision (its accessor is a `swift_once` check, which under
/// ThreadSanitizer takes a lock: see `ThreadPool.scanOrder`).
enum DebugLog {
    /// Whether `GRANDCENTRAL_DEBUG` asks for the lines; read once (see the type's comment).
    static let enabled: Bool = {
        guard let raw = getenv("GRANDCENTRAL_DEBUG") else { return false }
        let value = String(cString: raw)
        return !value.isEmpty && value != "0"
    }()

    /// Writes `GrandCentral: debug: pool: <message>`.
    static func pool(_ message: String) { write("pool", message) }

    /// Writes `GrandCentral: debug: timer: <message>`.
    static func timer(_ message: String) { write("timer", message) }

    /// Writes `GrandCentral: debug: library: <message>` (which runtime the process runs on).
    static func library(_ message: String) { if enabled { write("library", message) } }

    /// Writes `GrandCentral: debug: source: <message>`.
    static func source(_ message: String) { write("source", message) }

    private static func write(_ area: StaticString, _ message: String) {
        let line = "GrandCentral: debug: \(area): \(message)\n"
        line.withCString { gc_write_stderr($0) }
    }

    /// A root queue's name in the lines: `default`, `default.overcommit` (`RootQueues.all`'s
    /// index).
    static func rootName(index: Int) -> String {
        ThreadNames.rootNames[index / 2] + (index % 2 == 1 ? ".overcommit" : "")
    }

    /// `1 worker`, `2 workers`.
    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    /// Nanoseconds as microseconds, for the timer lines.
    static func microseconds(_ nanoseconds: UInt64) -> String { "\(nanoseconds / 1000) µs" }

    /// Nanoseconds as seconds with three decimals, for the pool's idle times.
    static func seconds(_ nanoseconds: UInt64) -> String {
        let millis = nanoseconds / 1_000_000
        let fraction = String(millis % 1000)
        return "\(millis / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction) s"
    }
}

/// Why the pool starts a worker: the rule of `ThreadPool`'s policy that fired (see
/// `ThreadPool` and `StarvationMonitor`). Passed to `startWorker` so the debug line can say
/// it; a constant argument, it costs the non-debug path nothing.
enum WorkerStartReason {
    /// A push made a root non-empty, no worker was idle, and fewer workers run than CPUs.
    case workQueued
    /// A worker took an item and saw more behind it, no worker was idle, and fewer workers
    /// run than CPUs.
    case moreWorkBehind
    /// A worker entered one of the library's own waits (`BlockingRegion`) with work queued:
    /// its CPU is free for that work.
    case workerBlocking
    /// A worker on its way out (idle timeout) saw work queued.
    case retiringWorkerSawWork
    /// The monitor: overcommit items waited and no overcommit item was taken for two ticks
    /// while workers computed or were blocked.
    case overcommitUnserved
    /// The monitor: non-overcommit items waited with fewer than one running (not blocked)
    /// worker per CPU; blocked workers are being replaced.
    case workersBlocked

    var text: String {
        switch self {
        case .workQueued: return "work queued and no idle worker"
        case .moreWorkBehind: return "more work queued behind a worker's item and no idle worker"
        case .workerBlocking: return "a worker is blocking in a library wait, its CPU is free"
        case .retiringWorkerSawWork: return "a retiring worker saw work queued"
        case .overcommitUnserved: return "stall detected by the monitor: overcommit work unserved for 2 ticks"
        case .workersBlocked: return "stall detected by the monitor: workers blocked, replacing"
        }
    }

    /// Whether the reason is about the overcommit roots (true), the non-overcommit ones
    /// (false), or any root (nil): which root the line names.
    var overcommit: Bool? {
        switch self {
        case .overcommitUnserved: return true
        case .workersBlocked: return false
        default: return nil
        }
    }
}
