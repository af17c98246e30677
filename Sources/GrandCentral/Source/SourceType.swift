import CGrandCentral
import Glibc

/// The kinds of source (`dispatch_source_type_t`), what handle and mask each accepts, and
/// which monitor watches for its events.
///
/// Validation follows libdispatch on Linux, observed: `dispatch_source_create` returns NULL
/// when the handle or mask makes no sense for the type (the table in source.h, tested row
/// by row in ctests/source_create.c). Data sources take handle 0 and mask 0; read and write
/// sources a descriptor (0 ... INT32_MAX; a closed descriptor is accepted and reports an
/// error later) with mask 0; signal sources a signal number 1 ... 64 with mask 0; timers
/// handle 0 ... 3 (libdispatch's private clock ids are 1, 2 and 3: uptime, monotonic,
/// wall; here every timer takes its clock from its start time, as with 0) and a mask within STRICT | 0x2 (libdispatch's
/// private BACKGROUND, accepted and ignored); process sources a pid above 0 and a mask
/// within EXIT | FORK | EXEC | SIGNAL; vnode sources a descriptor and a mask within the
/// DISPATCH_VNODE_* bits; interval sources an interval of at least 1 and a mask within
/// STRICT | DISPATCH_INTERVAL_UI_ANIMATION.
///
/// The cases (`.dataAdd`, `.dataOr`, `.dataReplace`, `.read`, `.write`, `.signal`, `.timer`,
/// `.process`, `.vnode`, `.interval`: libdispatch's private DISPATCH_SOURCE_TYPE_INTERVAL, a
/// timer every `handle` milliseconds or 1/60 s frames, phase-aligned on the uptime clock)
/// and their numbers are CGrandCentralKinds.h's, shared with the C shims.
typealias SourceType = gc_source_kind_t

/// Which handler a setter sets (`.event`, `.cancel`, `.registration`; CGrandCentralKinds.h).
typealias SourceHandlerKind = gc_source_handler_kind_t

extension SourceType {
    var name: String {
        switch self {
        case .dataAdd: return "data-add"
        case .dataOr: return "data-or"
        case .dataReplace: return "data-replace"
        case .read: return "read"
        case .write: return "write"
        case .signal: return "signal"
        case .timer: return "timer"
        case .process: return "proc"
        case .vnode: return "vnode"
        case .interval: return "interval"
        }
    }

    // libdispatch's mask bits (source.h).
    static let timerStrict: UInt = 0x1
    /// libdispatch's private DISPATCH_TIMER_BACKGROUND: accepted, no effect here.
    static let timerBackground: UInt = 0x2
    /// libdispatch takes 1, 2 and 3 as clock ids (private); anything above is not a timer.
    static let timerLargestHandle: UInt = 3
    static let processExit: UInt = 0x8000_0000
    static let processFork: UInt = 0x4000_0000
    static let processExec: UInt = 0x2000_0000
    static let processSignal: UInt = 0x0800_0000
    static let vnodeDelete: UInt = 0x1
    static let vnodeWrite: UInt = 0x2
    static let vnodeExtend: UInt = 0x4
    static let vnodeAttrib: UInt = 0x8
    static let vnodeLink: UInt = 0x10
    static let vnodeRename: UInt = 0x20
    static let vnodeRevoke: UInt = 0x40
    static let vnodeFunlock: UInt = 0x100
    /// DISPATCH_INTERVAL_UI_ANIMATION: an interval source counts 1/60 s frames.
    static let intervalAnimation: UInt = 0x20

    /// Whether `dispatch_source_create` accepts this handle and mask.
    func accepts(handle: UInt, mask: UInt) -> Bool {
        switch self {
        case .dataAdd, .dataOr, .dataReplace:
            return handle == 0 && mask == 0
        case .read, .write:
            return handle <= UInt(Int32.max) && mask == 0
        case .signal:
            return handle >= 1 && handle <= 64 && mask == 0
        case .timer:
            return handle <= SourceType.timerLargestHandle
                && mask & ~(SourceType.timerStrict | SourceType.timerBackground) == 0
        case .process:
            let all = SourceType.processExit | SourceType.processFork | SourceType.processExec | SourceType.processSignal
            return handle >= 1 && handle <= UInt(Int32.max) && mask & ~all == 0
        case .vnode:
            let all = SourceType.vnodeDelete | SourceType.vnodeWrite | SourceType.vnodeExtend
                | SourceType.vnodeAttrib | SourceType.vnodeLink | SourceType.vnodeRename
                | SourceType.vnodeRevoke | SourceType.vnodeFunlock
            return handle <= UInt(Int32.max) && mask & ~all == 0
        case .interval:
            return handle >= 1 && mask & ~(SourceType.timerStrict | SourceType.intervalAnimation) == 0
        }
    }

    /// Read and write sources report zero (end of file, no buffer space) as an event;
    /// every other kind's zero means "nothing happened".
    var firesWithZeroData: Bool { self == .read || self == .write }

    func makeMonitor(for source: SourceCore) -> any SourceMonitor {
        switch self {
        case .dataAdd, .dataOr, .dataReplace: return dataSourceMonitor
        case .read: return DescriptorMonitor(interest: .read)
        case .write: return DescriptorMonitor(interest: .write)
        case .timer, .interval: return SourceTimer(source: source)
        case .signal: return SignalMonitor()
        case .process: return ProcessMonitor()
        case .vnode: return VnodeMonitor()
        }
    }
}

/// How one kind of source meets the world (see SourceCore.swift).
///
/// Calls come from any thread, serialized by the source's `lifecycleLock` (start, stop,
/// suspend, resume) or made by its drain (`eventHandlerDidReturn`). `start` is called at
/// most once, and `stop` only after `start`; `suspend`/`resume` only between them. A
/// monitor merges events with the core's `mergeAdd`/`mergeOr`/`mergeReplace` from
/// wherever they arrive (the event thread), and calls `monitorDidStop()` exactly once,
/// after `stop`, when no further merge can happen; until then it keeps the core alive
/// (the registration's reference). A protocol rather than a base class so that a kind's
/// monitor can be an object the event loop needs anyway (a timer source's monitor is its
/// `TimerNode`): one allocation fewer per source.
protocol SourceMonitor: AnyObject, Sendable {
    /// Activation: register with the event thread.
    func start(_ source: SourceCore)
    /// Cancellation: unregister, then `source.monitorDidStop()`.
    func stop(_ source: SourceCore)
    /// The source's suspend count went 0 → 1: stop costing wakeups if the kind can.
    func suspend(_ source: SourceCore)
    /// The suspend count went back to 0.
    func resume(_ source: SourceCore)
    /// The drain delivered an event and the handler returned (on the target queue).
    func eventHandlerDidReturn(_ source: SourceCore)
}

extension SourceMonitor {
    func start(_ source: SourceCore) {}
    func stop(_ source: SourceCore) { source.monitorDidStop() }
    func suspend(_ source: SourceCore) {}
    func resume(_ source: SourceCore) {}
    func eventHandlerDidReturn(_ source: SourceCore) {}
}

/// The data sources' monitor: nothing to register (`dispatch_source_merge_data` is their
/// event), and stopping is immediate. Stateless, so every data source shares this one.
final class DataSourceMonitor: SourceMonitor {}
let dataSourceMonitor = DataSourceMonitor()
