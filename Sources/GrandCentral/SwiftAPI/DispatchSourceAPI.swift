import Glibc

// The Swift API of dispatch sources, spelled as Swift's Dispatch spells it.
//
// As in Dispatch, `DispatchSource` is one class that conforms to every source protocol of
// Dispatch on Linux, and the protocols' members are implemented once, in protocol extensions
// that reach the class (`sourceObject`); `make…Source` returns the class as the protocol of
// its kind. Beyond Dispatch on Linux, and spelled as Darwin's Dispatch spells them: process
// sources (`DispatchSourceProcess`, `DispatchSource.ProcessEvent`, `makeProcessSource`) and
// file system object sources (`DispatchSourceFileSystemObject`, `makeFileSystemObjectSource`),
// made as two internal subclasses (see below why not the class itself).
//
// The API calls the engine directly (SourceCore.swift), not the C ABI:
// - A handler closure becomes a `SourceHandler` whose context is a retained `ClosureBox`
//   of the closure (released by the handler's `dispose`, when the handler is replaced, or
//   when the core drops its handlers after the cancel handler ran — which is what frees a
//   handler that captured its own source). A `DispatchWorkItem` handler is retained the
//   same way and `perform()`ed at each event, as Dispatch runs the item's block: a
//   cancelled item's body is skipped, and the item completes (wait/notify) the first time.
// - `qos` and `flags` of the closure setters are accepted and not used: GrandCentral runs
//   handlers at their target queue's QoS, as it runs a queue's items.
// - Timers go to `SourceCore.setTimer` with `dispatch_time_t` values, as
//   `dispatch_source_set_timer` takes them: a `.never` (or infinite) repeat interval is
//   FOREVER, i.e. a one-shot timer; seconds convert to nanoseconds, saturating.
// - Misuse that Dispatch traps on (a negative descriptor, a signal number out of range, a
//   negative interval, a timer call on a source that is not a timer) is a BUG IN CLIENT
//   with a message naming the call.

/// The type of a source's event, cancel and registration handlers.
public typealias DispatchSourceHandler = () -> Void

// MARK: - Protocols

/// What every dispatch source can do. Only `DispatchSource` conforms (use the `make…Source`
/// class methods of `DispatchSource`).
public protocol DispatchSourceProtocol {
    func setEventHandler(qos: DispatchQoS, flags: DispatchWorkItemFlags, handler: DispatchSourceHandler?)
    func setEventHandler(handler: DispatchWorkItem)
    func setCancelHandler(qos: DispatchQoS, flags: DispatchWorkItemFlags, handler: DispatchSourceHandler?)
    func setCancelHandler(handler: DispatchWorkItem)
    func setRegistrationHandler(qos: DispatchQoS, flags: DispatchWorkItemFlags, handler: DispatchSourceHandler?)
    func setRegistrationHandler(handler: DispatchWorkItem)
    func activate()
    func cancel()
    func resume()
    func suspend()
    var handle: UInt { get }
    var mask: UInt { get }
    var data: UInt { get }
    var isCancelled: Bool { get }
}

/// A source whose event is data the program merges by adding (`add(data:)`).
public protocol DispatchSourceUserDataAdd: DispatchSourceProtocol {
    func add(data: UInt)
}

/// A source whose event is data the program merges by or-ing (`or(data:)`).
public protocol DispatchSourceUserDataOr: DispatchSourceProtocol {
    func or(data: UInt)
}

/// A source whose event is data the program merges by replacing (`replace(data:)`).
public protocol DispatchSourceUserDataReplace: DispatchSourceProtocol {
    func replace(data: UInt)
}

/// A source that fires when a descriptor has data to read; `data` is the bytes available.
public protocol DispatchSourceRead: DispatchSourceProtocol {}

/// A source that fires when a descriptor can be written; `data` is the buffer space.
public protocol DispatchSourceWrite: DispatchSourceProtocol {}

/// A source that fires when the process receives a signal; `data` is the number of
/// signals since the handler last ran.
public protocol DispatchSourceSignal: DispatchSourceProtocol {}

/// A timer; `data` is the number of fires since the handler last ran.
public protocol DispatchSourceTimer: DispatchSourceProtocol {
    func scheduleOneshot(deadline: DispatchTime, leeway: DispatchTimeInterval)
    func scheduleOneshot(wallDeadline: DispatchWallTime, leeway: DispatchTimeInterval)
    func scheduleRepeating(deadline: DispatchTime, interval: DispatchTimeInterval, leeway: DispatchTimeInterval)
    func scheduleRepeating(deadline: DispatchTime, interval: Double, leeway: DispatchTimeInterval)
    func scheduleRepeating(wallDeadline: DispatchWallTime, interval: DispatchTimeInterval, leeway: DispatchTimeInterval)
    func scheduleRepeating(wallDeadline: DispatchWallTime, interval: Double, leeway: DispatchTimeInterval)
}

/// A source that watches a process (Darwin's spelling; not in Dispatch on Linux).
public protocol DispatchSourceProcess: DispatchSourceProtocol {
    /// The process identifier being watched.
    var handle: pid_t { get }
    /// The events seen since the handler last ran.
    var data: DispatchSource.ProcessEvent { get }
    /// The events being watched.
    var mask: DispatchSource.ProcessEvent { get }
}

/// A source that watches a file system object through an open descriptor (Darwin's
/// spelling; not in Dispatch on Linux).
public protocol DispatchSourceFileSystemObject: DispatchSourceProtocol {
    /// The descriptor being watched.
    var handle: Int32 { get }
    /// The events seen since the handler last ran.
    var data: DispatchSource.FileSystemEvent { get }
    /// The events being watched.
    var mask: DispatchSource.FileSystemEvent { get }
}

// `DispatchSource` conforms to the protocols Dispatch on Linux has in its declaration
// (DispatchSource.swift). Process and file system object sources are instances of these two
// subclasses, which alone conform to DispatchSourceProcess and DispatchSourceFileSystemObject:
// were `DispatchSource` itself to conform (as Darwin's does), their typed `handle`, `data` and
// `mask` would overload its `UInt` ones, and `source.data` on a `DispatchSource` would no
// longer compile (ambiguous) where it does with Linux's Dispatch.

/// A process source (`makeProcessSource`).
final class ProcessDispatchSource: DispatchSource, DispatchSourceProcess, @unchecked Sendable {}

/// A file system object source (`makeFileSystemObjectSource`).
final class FileSystemObjectDispatchSource: DispatchSource, DispatchSourceFileSystemObject, @unchecked Sendable {}

// MARK: - Flag sets

extension DispatchSource {
    /// Events a process source watches and reports (`DISPATCH_PROC_*`).
    public struct ProcessEvent: OptionSet, RawRepresentable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// The process exited.
        public static let exit = ProcessEvent(rawValue: 0x8000_0000)
        /// The process forked.
        public static let fork = ProcessEvent(rawValue: 0x4000_0000)
        /// The process executed a new image.
        public static let exec = ProcessEvent(rawValue: 0x2000_0000)
        /// The process received a signal.
        public static let signal = ProcessEvent(rawValue: 0x0800_0000)
        public static let all: ProcessEvent = [.exit, .fork, .exec, .signal]
    }

    /// Options of a timer source (`DISPATCH_TIMER_*`).
    public struct TimerFlags: OptionSet, RawRepresentable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// Observe the leeway strictly. (GrandCentral's timers never use more leeway than
        /// given in any case.)
        public static let strict = TimerFlags(rawValue: 1)
    }

    /// Events a file system object source watches and reports (`DISPATCH_VNODE_*`).
    public struct FileSystemEvent: OptionSet, RawRepresentable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        public static let delete = FileSystemEvent(rawValue: 0x1)
        public static let write = FileSystemEvent(rawValue: 0x2)
        public static let extend = FileSystemEvent(rawValue: 0x4)
        public static let attrib = FileSystemEvent(rawValue: 0x8)
        public static let link = FileSystemEvent(rawValue: 0x10)
        public static let rename = FileSystemEvent(rawValue: 0x20)
        public static let revoke = FileSystemEvent(rawValue: 0x40)
        public static let funlock = FileSystemEvent(rawValue: 0x100)
        /// Every event but `funlock`, as in Dispatch.
        public static let all: FileSystemEvent = [.delete, .write, .extend, .attrib, .link, .rename, .revoke]
    }
}

// MARK: - Making sources

extension DispatchSource {
    /// The engine of a new, inactive source, or a BUG IN CLIENT naming `caller` and `what`
    /// was wrong.
    private static func core(_ type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?,
                             caller: StaticString, _ what: @autoclosure () -> String) -> SourceCore {
        guard let core = SourceCore.make(type: type, handle: handle, mask: mask, queue: queue) else {
            clientBug(caller, message: what())
        }
        return core
    }

    /// A new, inactive `DispatchSource`, or a BUG IN CLIENT (see `core`).
    private static func make(_ type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?,
                             caller: StaticString, _ what: @autoclosure () -> String) -> DispatchSource {
        DispatchSource(core: core(type, handle: handle, mask: mask, queue: queue, caller: caller, what()))
    }

    /// A timer source, inactive; set it with `schedule(…)` and start it with `activate()`.
    public class func makeTimerSource(flags: TimerFlags = [], queue: DispatchQueue? = nil) -> DispatchSourceTimer {
        make(.timer, handle: 0, mask: flags.rawValue, queue: queue, caller: "DispatchSource.makeTimerSource(flags:queue:)",
             "flags 0x\(String(flags.rawValue, radix: 16)) are not timer flags")
    }

    /// A source that fires while `fileDescriptor` has data to read. The descriptor stays
    /// the caller's: close it in the cancel handler.
    public class func makeReadSource(fileDescriptor: Int32, queue: DispatchQueue? = nil) -> DispatchSourceRead {
        make(.read, handle: UInt(truncatingIfNeeded: fileDescriptor), mask: 0, queue: queue,
             caller: "DispatchSource.makeReadSource(fileDescriptor:queue:)",
             "file descriptor \(fileDescriptor) is negative")
    }

    /// A source that fires while `fileDescriptor` can be written. The descriptor stays the
    /// caller's: close it in the cancel handler.
    public class func makeWriteSource(fileDescriptor: Int32, queue: DispatchQueue? = nil) -> DispatchSourceWrite {
        make(.write, handle: UInt(truncatingIfNeeded: fileDescriptor), mask: 0, queue: queue,
             caller: "DispatchSource.makeWriteSource(fileDescriptor:queue:)",
             "file descriptor \(fileDescriptor) is negative")
    }

    /// A source that fires when the process receives `signal`.
    public class func makeSignalSource(signal: Int32, queue: DispatchQueue? = nil) -> DispatchSourceSignal {
        make(.signal, handle: UInt(truncatingIfNeeded: signal), mask: 0, queue: queue,
             caller: "DispatchSource.makeSignalSource(signal:queue:)",
             "\(signal) is not a signal number (1 ... 64)")
    }

    /// A source that fires on `eventMask`'s events of process `identifier`.
    public class func makeProcessSource(identifier: pid_t, eventMask: ProcessEvent,
                                        queue: DispatchQueue? = nil) -> DispatchSourceProcess {
        ProcessDispatchSource(core: core(
            .process, handle: UInt(truncatingIfNeeded: identifier), mask: eventMask.rawValue, queue: queue,
            caller: "DispatchSource.makeProcessSource(identifier:eventMask:queue:)",
            identifier <= 0 ? "process identifier \(identifier) is not a process"
                : "event mask 0x\(String(eventMask.rawValue, radix: 16)) has bits that are not process events"))
    }

    /// A source that fires on `eventMask`'s events of the file open as `fileDescriptor`.
    /// The descriptor stays the caller's: close it in the cancel handler.
    public class func makeFileSystemObjectSource(fileDescriptor: Int32, eventMask: FileSystemEvent,
                                                 queue: DispatchQueue? = nil) -> DispatchSourceFileSystemObject {
        FileSystemObjectDispatchSource(core: core(
            .vnode, handle: UInt(truncatingIfNeeded: fileDescriptor), mask: eventMask.rawValue, queue: queue,
            caller: "DispatchSource.makeFileSystemObjectSource(fileDescriptor:eventMask:queue:)",
            fileDescriptor < 0 ? "file descriptor \(fileDescriptor) is negative"
                : "event mask 0x\(String(eventMask.rawValue, radix: 16)) has bits that are not file system events"))
    }

    /// A source whose data is the sum of the values given to `add(data:)`.
    public class func makeUserDataAddSource(queue: DispatchQueue? = nil) -> DispatchSourceUserDataAdd {
        make(.dataAdd, handle: 0, mask: 0, queue: queue, caller: "DispatchSource.makeUserDataAddSource(queue:)", "")
    }

    /// A source whose data is the bitwise or of the values given to `or(data:)`.
    public class func makeUserDataOrSource(queue: DispatchQueue? = nil) -> DispatchSourceUserDataOr {
        make(.dataOr, handle: 0, mask: 0, queue: queue, caller: "DispatchSource.makeUserDataOrSource(queue:)", "")
    }

    /// A source whose data is the last value given to `replace(data:)`.
    public class func makeUserDataReplaceSource(queue: DispatchQueue? = nil) -> DispatchSourceUserDataReplace {
        make(.dataReplace, handle: 0, mask: 0, queue: queue, caller: "DispatchSource.makeUserDataReplaceSource(queue:)", "")
    }
}

// MARK: - Handlers and state

/// Runs a closure handler; `context` is the handler's `ClosureBox` (its reference stays).
private let sourceClosureHandler: DispatchFunction = { context in
    Unmanaged<ClosureBox>.fromOpaque(context!).takeUnretainedValue().body()
}

/// Releases a closure handler's box.
private let sourceClosureDispose: DispatchFunction = { context in
    Unmanaged<ClosureBox>.fromOpaque(context!).release()
}

/// Performs a work item handler; `context` is the item (its reference stays).
private let sourceWorkItemHandler: DispatchFunction = { context in
    Unmanaged<DispatchWorkItem>.fromOpaque(context!).takeUnretainedValue().perform()
}

/// Releases a work item handler's item.
private let sourceWorkItemDispose: DispatchFunction = { context in
    Unmanaged<DispatchWorkItem>.fromOpaque(context!).release()
}

extension DispatchSource {
    func setHandler(_ kind: SourceHandlerKind, closure: DispatchSourceHandler?) {
        core.setHandler(kind, closure.map {
            SourceHandler(function: sourceClosureHandler, context: Unmanaged.passRetained(ClosureBox($0)).toOpaque(),
                          usesSourceContext: false, dispose: sourceClosureDispose)
        })
    }

    func setHandler(_ kind: SourceHandlerKind, workItem: DispatchWorkItem) {
        core.setHandler(kind, SourceHandler(function: sourceWorkItemHandler,
                                            context: Unmanaged.passRetained(workItem).toOpaque(),
                                            usesSourceContext: false, dispose: sourceWorkItemDispose))
    }
}

extension DispatchSourceProtocol {
    /// The source object behind the protocol. Only `DispatchSource` conforms in practice; a
    /// type of the program's own that adopts the protocol and calls these defaults is a
    /// client bug (Dispatch traps on the same cast).
    @inline(__always)
    var sourceObject: DispatchSource {
        guard let source = self as? DispatchSource else {
            clientBug("DispatchSourceProtocol", message: "\(Self.self) is not a DispatchSource")
        }
        return source
    }

    /// Sets the closure run for each event (nil removes it).
    public func setEventHandler(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                                handler: DispatchSourceHandler?) {
        sourceObject.setHandler(.event, closure: handler)
    }

    /// Sets the work item performed for each event.
    public func setEventHandler(handler: DispatchWorkItem) {
        sourceObject.setHandler(.event, workItem: handler)
    }

    /// Sets the closure run once after cancellation, when the last event handler has
    /// returned (nil removes it).
    public func setCancelHandler(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                                 handler: DispatchSourceHandler?) {
        sourceObject.setHandler(.cancel, closure: handler)
    }

    /// Sets the work item performed once after cancellation.
    public func setCancelHandler(handler: DispatchWorkItem) {
        sourceObject.setHandler(.cancel, workItem: handler)
    }

    /// Sets the closure run once when the source is activated, before any event handler
    /// (nil removes it).
    public func setRegistrationHandler(qos: DispatchQoS = .unspecified, flags: DispatchWorkItemFlags = [],
                                       handler: DispatchSourceHandler?) {
        sourceObject.setHandler(.registration, closure: handler)
    }

    /// Sets the work item performed once when the source is activated.
    public func setRegistrationHandler(handler: DispatchWorkItem) {
        sourceObject.setHandler(.registration, workItem: handler)
    }

    /// Starts an inactive source.
    public func activate() { sourceObject.activate() }

    /// Stops the source for good: no event handler starts afterwards; the cancel handler
    /// runs once the last one has returned.
    public func cancel() { sourceObject.core.cancel() }

    /// Resumes a suspended source (or activates an inactive one).
    public func resume() { sourceObject.resume() }

    /// Holds back the source's events (they coalesce into its data) until `resume()`.
    public func suspend() { sourceObject.suspend() }

    /// What the source watches: a descriptor, a signal number, a process identifier; 0 for
    /// timers and data sources.
    public var handle: UInt { sourceObject.core.handle }

    /// The events or flags the source was made with.
    public var mask: UInt { sourceObject.core.mask }

    /// The data of the event being handled (read it in the event handler).
    public var data: UInt { sourceObject.core.deliveredData.load(ordering: .acquiring) }

    /// Whether `cancel()` has been called (or the source was released).
    public var isCancelled: Bool { sourceObject.core.isCancelled }
}

extension DispatchSourceProcess {
    public var handle: pid_t { pid_t(truncatingIfNeeded: sourceObject.core.handle) }

    public var data: DispatchSource.ProcessEvent {
        DispatchSource.ProcessEvent(rawValue: sourceObject.core.deliveredData.load(ordering: .acquiring))
    }

    public var mask: DispatchSource.ProcessEvent { DispatchSource.ProcessEvent(rawValue: sourceObject.core.mask) }
}

extension DispatchSourceFileSystemObject {
    public var handle: Int32 { Int32(truncatingIfNeeded: sourceObject.core.handle) }

    public var data: DispatchSource.FileSystemEvent {
        DispatchSource.FileSystemEvent(rawValue: sourceObject.core.deliveredData.load(ordering: .acquiring))
    }

    public var mask: DispatchSource.FileSystemEvent { DispatchSource.FileSystemEvent(rawValue: sourceObject.core.mask) }
}

extension DispatchSourceUserDataAdd {
    /// Adds `data` to the pending data and makes the event handler due; 0 does nothing.
    public func add(data: UInt) { sourceObject.core.mergeData(data, caller: "DispatchSourceUserDataAdd.add(data:)") }
}

extension DispatchSourceUserDataOr {
    /// Ors `data` into the pending data and makes the event handler due; 0 does nothing.
    public func or(data: UInt) { sourceObject.core.mergeData(data, caller: "DispatchSourceUserDataOr.or(data:)") }
}

extension DispatchSourceUserDataReplace {
    /// Replaces the pending data with `data` and makes the event handler due; 0 is stored
    /// but makes nothing due (a pending event is taken back).
    public func replace(data: UInt) { sourceObject.core.mergeData(data, caller: "DispatchSourceUserDataReplace.replace(data:)") }
}

// MARK: - Timers

extension DispatchSource {
    /// `dispatch_source_set_timer` on this source, which must be a timer.
    func setTimer(start: UInt64, interval: UInt64, leeway: DispatchTimeInterval, caller: StaticString) {
        core.setTimer(start: start, interval: interval, leeway: Self.nanoseconds(leeway, caller, "negative leeway"),
                      caller: caller)
    }

    /// A repeat interval or a leeway in nanoseconds; `.never` is FOREVER.
    static func nanoseconds(_ interval: DispatchTimeInterval, _ caller: StaticString, _ negative: StaticString) -> UInt64 {
        if interval == .never { return DispatchClock.forever }
        let count = interval.nanosecondCount
        if count < 0 { clientBug(caller, negative) }
        return UInt64(count)
    }

    /// A repeat interval in seconds as nanoseconds, saturating; an infinite (or NaN)
    /// interval is FOREVER, a one-shot timer.
    static func nanoseconds(seconds: Double, _ caller: StaticString) -> UInt64 {
        if seconds.isInfinite || seconds.isNaN { return DispatchClock.forever }
        if seconds < 0 { clientBug(caller, "negative repeat interval") }
        let nanoseconds = seconds * 1_000_000_000
        if nanoseconds >= 18_446_744_073_709_551_615.0 { return DispatchClock.forever }
        return UInt64(nanoseconds)
    }
}

extension DispatchSourceTimer {
    /// Sets a one-shot timer at `deadline` (uptime clock).
    @available(swift, deprecated: 4, renamed: "schedule(deadline:repeating:leeway:)")
    public func scheduleOneshot(deadline: DispatchTime, leeway: DispatchTimeInterval = .nanoseconds(0)) {
        sourceObject.setTimer(start: deadline.rawValue, interval: DispatchClock.forever, leeway: leeway,
                              caller: "DispatchSourceTimer.scheduleOneshot(deadline:leeway:)")
    }

    /// Sets a one-shot timer at `wallDeadline` (wall clock).
    @available(swift, deprecated: 4, renamed: "schedule(wallDeadline:repeating:leeway:)")
    public func scheduleOneshot(wallDeadline: DispatchWallTime, leeway: DispatchTimeInterval = .nanoseconds(0)) {
        sourceObject.setTimer(start: wallDeadline.rawValue, interval: DispatchClock.forever, leeway: leeway,
                              caller: "DispatchSourceTimer.scheduleOneshot(wallDeadline:leeway:)")
    }

    /// Sets a timer at `deadline` repeating every `interval`.
    @available(swift, deprecated: 4, renamed: "schedule(deadline:repeating:leeway:)")
    public func scheduleRepeating(deadline: DispatchTime, interval: DispatchTimeInterval,
                                  leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.scheduleRepeating(deadline:interval:leeway:)"
        sourceObject.setTimer(start: deadline.rawValue,
                              interval: DispatchSource.nanoseconds(interval, caller, "negative repeat interval"),
                              leeway: leeway, caller: caller)
    }

    /// Sets a timer at `deadline` repeating every `interval` seconds.
    @available(swift, deprecated: 4, renamed: "schedule(deadline:repeating:leeway:)")
    public func scheduleRepeating(deadline: DispatchTime, interval: Double, leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.scheduleRepeating(deadline:interval:leeway:)"
        sourceObject.setTimer(start: deadline.rawValue, interval: DispatchSource.nanoseconds(seconds: interval, caller),
                              leeway: leeway, caller: caller)
    }

    /// Sets a wall-clock timer at `wallDeadline` repeating every `interval`.
    @available(swift, deprecated: 4, renamed: "schedule(wallDeadline:repeating:leeway:)")
    public func scheduleRepeating(wallDeadline: DispatchWallTime, interval: DispatchTimeInterval,
                                  leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.scheduleRepeating(wallDeadline:interval:leeway:)"
        sourceObject.setTimer(start: wallDeadline.rawValue,
                              interval: DispatchSource.nanoseconds(interval, caller, "negative repeat interval"),
                              leeway: leeway, caller: caller)
    }

    /// Sets a wall-clock timer at `wallDeadline` repeating every `interval` seconds.
    @available(swift, deprecated: 4, renamed: "schedule(wallDeadline:repeating:leeway:)")
    public func scheduleRepeating(wallDeadline: DispatchWallTime, interval: Double,
                                  leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.scheduleRepeating(wallDeadline:interval:leeway:)"
        sourceObject.setTimer(start: wallDeadline.rawValue, interval: DispatchSource.nanoseconds(seconds: interval, caller),
                              leeway: leeway, caller: caller)
    }

    /// Sets the timer: first at `deadline` (uptime clock), then every `repeating` (`.never`:
    /// once). Data pending from the previous setting is dropped; the timer never fires early.
    @available(swift, introduced: 4)
    public func schedule(deadline: DispatchTime, repeating interval: DispatchTimeInterval = .never,
                         leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.schedule(deadline:repeating:leeway:)"
        sourceObject.setTimer(start: deadline.rawValue,
                              interval: DispatchSource.nanoseconds(interval, caller, "negative repeat interval"),
                              leeway: leeway, caller: caller)
    }

    /// Sets the timer: first at `deadline` (uptime clock), then every `repeating` seconds
    /// (`.infinity`: once).
    @available(swift, introduced: 4)
    public func schedule(deadline: DispatchTime, repeating interval: Double, leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.schedule(deadline:repeating:leeway:)"
        sourceObject.setTimer(start: deadline.rawValue, interval: DispatchSource.nanoseconds(seconds: interval, caller),
                              leeway: leeway, caller: caller)
    }

    /// Sets the timer: first at `wallDeadline` (wall clock, following it when it is set),
    /// then every `repeating` (`.never`: once).
    @available(swift, introduced: 4)
    public func schedule(wallDeadline: DispatchWallTime, repeating interval: DispatchTimeInterval = .never,
                         leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.schedule(wallDeadline:repeating:leeway:)"
        sourceObject.setTimer(start: wallDeadline.rawValue,
                              interval: DispatchSource.nanoseconds(interval, caller, "negative repeat interval"),
                              leeway: leeway, caller: caller)
    }

    /// Sets the timer: first at `wallDeadline` (wall clock), then every `repeating` seconds
    /// (`.infinity`: once).
    @available(swift, introduced: 4)
    public func schedule(wallDeadline: DispatchWallTime, repeating interval: Double,
                         leeway: DispatchTimeInterval = .nanoseconds(0)) {
        let caller: StaticString = "DispatchSourceTimer.schedule(wallDeadline:repeating:leeway:)"
        sourceObject.setTimer(start: wallDeadline.rawValue, interval: DispatchSource.nanoseconds(seconds: interval, caller),
                              leeway: leeway, caller: caller)
    }
}
