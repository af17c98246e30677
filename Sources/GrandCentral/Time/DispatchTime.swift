/// An instant on the uptime clock (CLOCK_MONOTONIC), spelled like Swift's `Dispatch`.
///
/// `rawValue` is the `dispatch_time_t` the C API uses, so `DispatchTime.now().rawValue` can
/// be handed to any C function that takes one. Ordering compares raw values, as Swift's
/// `Dispatch` does: `distantFuture` (FOREVER, ~0) is after everything.
public struct DispatchTime: Comparable, Sendable {
    /// The `dispatch_time_t` encoding of this instant.
    public let rawValue: UInt64

    /// The current instant.
    public static func now() -> DispatchTime {
        DispatchTime(rawValue: DispatchClock.time(DispatchClock.now, 0))
    }

    /// An instant that never comes: DISPATCH_TIME_FOREVER.
    public static let distantFuture = DispatchTime(rawValue: DispatchClock.forever)

    /// Wraps a `dispatch_time_t` as is. Internal, as in Swift's `Dispatch`.
    init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// The instant `uptimeNanoseconds` after boot, not counting time spent suspended.
    /// As in Swift's `Dispatch`, `DispatchTime(uptimeNanoseconds: 0)` is `now()`: 0 is
    /// DISPATCH_TIME_NOW.
    public init(uptimeNanoseconds: UInt64) {
        self.rawValue = uptimeNanoseconds
    }

    /// Nanoseconds since boot (the raw value; `distantFuture` gives `UInt64.max`).
    public var uptimeNanoseconds: UInt64 { rawValue }

    /// Whether `a` comes before `b`.
    public static func < (a: DispatchTime, b: DispatchTime) -> Bool {
        a.rawValue < b.rawValue
    }

    /// Whether `a` and `b` are the same point in time.
    public static func == (a: DispatchTime, b: DispatchTime) -> Bool {
        a.rawValue == b.rawValue
    }
}

/// A span of time to add to or subtract from a `DispatchTime` or `DispatchWallTime`.
///
/// A span too long for 64-bit nanoseconds saturates, so `.seconds(Int.max)` and
/// `.milliseconds(Int.max)` are equal (and added to an instant give `distantFuture`).
/// `.never` equals only itself.
public enum DispatchTimeInterval: Equatable, Sendable {
    case seconds(Int)
    case milliseconds(Int)
    case microseconds(Int)
    case nanoseconds(Int)
    case never

    /// The span in nanoseconds, clamped to `Int64`; `.never` is `Int64.max`.
    /// (Swift's `Dispatch` calls this `rawValue`; it is internal there too.)
    var nanosecondCount: Int64 {
        switch self {
        case .seconds(let s): return Self.clampedProduct(s, 1_000_000_000)
        case .milliseconds(let ms): return Self.clampedProduct(ms, 1_000_000)
        case .microseconds(let us): return Self.clampedProduct(us, 1_000)
        case .nanoseconds(let ns): return Int64(ns)
        case .never: return Int64.max
        }
    }

    private static func clampedProduct(_ value: Int, _ scale: Int64) -> Int64 {
        let (product, overflow) = Int64(value).multipliedReportingOverflow(by: scale)
        if overflow { return value > 0 ? Int64.max : Int64.min }
        return product
    }

    /// Whether both intervals are the same length (`.never` equals only itself).
    public static func == (lhs: DispatchTimeInterval, rhs: DispatchTimeInterval) -> Bool {
        switch (lhs, rhs) {
        case (.never, .never): return true
        case (.never, _), (_, .never): return false
        default: return lhs.nanosecondCount == rhs.nanosecondCount
        }
    }
}

/// The result of a wait with a timeout.
public enum DispatchTimeoutResult: Sendable {
    case success
    case timedOut
}

/// Seconds as nanoseconds, clamped to `Int64`; NaN counts as forever, as in Swift's
/// `Dispatch`.
@inline(__always)
func nanosecondsClamped(seconds: Double) -> Int64 {
    let nanoseconds = seconds * 1_000_000_000
    if nanoseconds.isNaN || nanoseconds >= Double(Int64.max) { return Int64.max }
    if nanoseconds <= Double(Int64.min) { return Int64.min }
    return Int64(nanoseconds)
}

/// The negation of a nanosecond delta, saturating (-Int64.min is Int64.max).
/// Swift's `Dispatch` traps on `time - .nanoseconds(Int.min)`; we saturate instead.
@inline(__always)
func negatedDelta(_ delta: Int64) -> Int64 {
    delta == Int64.min ? Int64.max : -delta
}

/// `time` moved later by `interval`, saturating at `distantFuture`.
public func + (time: DispatchTime, interval: DispatchTimeInterval) -> DispatchTime {
    DispatchTime(rawValue: DispatchClock.time(time.rawValue, interval.nanosecondCount))
}

/// `time` moved earlier by `interval`.
public func - (time: DispatchTime, interval: DispatchTimeInterval) -> DispatchTime {
    DispatchTime(rawValue: DispatchClock.time(time.rawValue, negatedDelta(interval.nanosecondCount)))
}

/// `time` moved later by `seconds`, saturating at `distantFuture`.
public func + (time: DispatchTime, seconds: Double) -> DispatchTime {
    DispatchTime(rawValue: DispatchClock.time(time.rawValue, nanosecondsClamped(seconds: seconds)))
}

/// `time` moved earlier by `seconds`.
public func - (time: DispatchTime, seconds: Double) -> DispatchTime {
    DispatchTime(rawValue: DispatchClock.time(time.rawValue, nanosecondsClamped(seconds: -seconds)))
}
