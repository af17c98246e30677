import Glibc

/// An instant on the wall clock (CLOCK_REALTIME), spelled like Swift's `Dispatch`.
///
/// `rawValue` is the `dispatch_time_t` encoding: minus the nanoseconds since the epoch.
/// A deadline on this clock moves when the system clock is set; a `DispatchTime` does not.
public struct DispatchWallTime: Comparable, Sendable {
    /// The `dispatch_time_t` encoding of this instant.
    public let rawValue: UInt64

    /// The current wall-clock instant.
    public static func now() -> DispatchWallTime {
        DispatchWallTime(rawValue: DispatchClock.walltime(nil, 0))
    }

    /// An instant that never comes: DISPATCH_TIME_FOREVER.
    public static let distantFuture = DispatchWallTime(rawValue: DispatchClock.forever)

    /// Wraps a `dispatch_time_t` as is. Internal, as in Swift's `Dispatch`.
    init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// The wall-clock instant `timespec` (seconds and nanoseconds since the epoch).
    public init(timespec: timespec) {
        var spec = timespec
        self.rawValue = DispatchClock.walltime(&spec, 0)
    }

    /// Earlier instants first; `distantFuture` is after everything. Like Swift's
    /// `Dispatch`, this compares the negated raw values, so DISPATCH_WALLTIME_NOW (~1)
    /// sorts as "2 ns after the epoch", not as the current time.
    public static func < (a: DispatchWallTime, b: DispatchWallTime) -> Bool {
        if b.rawValue == DispatchClock.forever { return a.rawValue != DispatchClock.forever }
        if a.rawValue == DispatchClock.forever { return false }
        return 0 &- Int64(bitPattern: a.rawValue) < 0 &- Int64(bitPattern: b.rawValue)
    }

    /// Whether `a` and `b` are the same point in time.
    public static func == (a: DispatchWallTime, b: DispatchWallTime) -> Bool {
        a.rawValue == b.rawValue
    }
}

/// `time` moved later by `interval`, saturating at `distantFuture`.
public func + (time: DispatchWallTime, interval: DispatchTimeInterval) -> DispatchWallTime {
    DispatchWallTime(rawValue: DispatchClock.time(time.rawValue, interval.nanosecondCount))
}

/// `time` moved earlier by `interval`.
public func - (time: DispatchWallTime, interval: DispatchTimeInterval) -> DispatchWallTime {
    DispatchWallTime(rawValue: DispatchClock.time(time.rawValue, negatedDelta(interval.nanosecondCount)))
}

/// `time` moved later by `seconds`, saturating at `distantFuture`.
public func + (time: DispatchWallTime, seconds: Double) -> DispatchWallTime {
    DispatchWallTime(rawValue: DispatchClock.time(time.rawValue, nanosecondsClamped(seconds: seconds)))
}

/// `time` moved earlier by `seconds`.
public func - (time: DispatchWallTime, seconds: Double) -> DispatchWallTime {
    DispatchWallTime(rawValue: DispatchClock.time(time.rawValue, nanosecondsClamped(seconds: -seconds)))
}
