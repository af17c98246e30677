import CGrandCentral
import Glibc

/// `dispatch_time_t`, encoded exactly as libdispatch encodes it (DESIGN.md, hard rule 4),
/// because client code stores, compares and does arithmetic on these values.
///
/// A `dispatch_time_t` names an instant on one of three clocks:
///
/// ```
///   0                          DISPATCH_TIME_NOW: "now" on the uptime clock
///   ~0                         DISPATCH_TIME_FOREVER: never
///   ~1                         DISPATCH_WALLTIME_NOW: "now" on the wall clock
///   1 << 63                    "now" on the boot clock (libdispatch's private
///                              DISPATCH_MONOTONICTIME_NOW)
///   bit 63 clear               uptime: nanoseconds of CLOCK_MONOTONIC
///   bit 63 set, bit 62 clear   boot clock: (1 << 63) | nanoseconds of CLOCK_BOOTTIME
///   bit 63 set, bit 62 set     wall clock: -(nanoseconds since the epoch), two's complement
/// ```
///
/// A value on any clock is below `2^62 - 1`; arithmetic that reaches it saturates to
/// FOREVER, as libdispatch's does (probed against the toolchain's libdispatch.so: for
/// every clock, `dispatch_time(x, 0)` is FOREVER from `2^62 - 1` up, and the largest value
/// it returns is `2^62 - 2`). The boot clock is not in the public header, but the
/// toolchain's libdispatch decodes it, so we do too: a value with bit 63 set and bit 62
/// clear must not be mistaken for a wall-clock time.
///
/// `DispatchClock` is the one place that knows this encoding; everything else (waits,
/// timers, the Swift API, the C exports) goes through it.
enum DispatchClock {
    /// The clock an instant is measured on. Raw values are the platform layer's GC_CLOCK_*.
    enum Kind: Int, CaseIterable, Sendable {
        /// CLOCK_MONOTONIC: stops while the machine is suspended. `dispatch_time`'s clock.
        case uptime = 0
        /// CLOCK_REALTIME: nanoseconds since the epoch; jumps when the clock is set.
        case wall = 1
        /// CLOCK_BOOTTIME: like uptime, but keeps counting through a suspend.
        case boot = 2
    }

    /// An instant decoded from a `dispatch_time_t`: a clock and nanoseconds on it.
    struct Instant: Equatable, Sendable {
        var kind: Kind
        var nanoseconds: UInt64
    }

    /// DISPATCH_TIME_NOW.
    static let now: UInt64 = 0
    /// DISPATCH_TIME_FOREVER.
    static let forever: UInt64 = ~0
    /// DISPATCH_WALLTIME_NOW.
    static let wallNow: UInt64 = ~1
    /// libdispatch's DISPATCH_MONOTONICTIME_NOW: now on the boot clock.
    static let bootNow: UInt64 = 1 << 63
    /// The first clock value that is not representable; it and everything above saturate.
    static let limit: UInt64 = (1 << 62) - 1

    private static let bootBit: UInt64 = 1 << 63
    private static let wallBit: UInt64 = 1 << 62

    /// Reads `kind`'s clock, in nanoseconds.
    @inline(__always)
    static func read(_ kind: Kind) -> UInt64 {
        switch kind {
        case .uptime: return gc_uptime_ns()
        case .wall: return gc_walltime_ns()
        case .boot: return gc_boottime_ns()
        }
    }

    /// Decodes `time`. Returns nil for FOREVER and for values at or past `limit` (which
    /// libdispatch also treats as FOREVER). The three "now" constants read their clock when
    /// `resolvingNow` is true; otherwise they decode to nanosecond 0 of their clock, an
    /// instant that is always already past (enough for a deadline, and no clock read).
    @inline(__always)
    static func decode(_ time: UInt64, resolvingNow: Bool = true) -> Instant? {
        let kind: Kind
        let value: UInt64
        if time & bootBit == 0 {
            kind = .uptime
            value = time
        } else if time & wallBit != 0 {
            if time == forever { return nil }
            kind = .wall
            value = time == wallNow ? 0 : 0 &- time
        } else {
            kind = .boot
            value = time & ~bootBit
        }
        if value == 0 {
            return Instant(kind: kind, nanoseconds: resolvingNow ? read(kind) : 0)
        }
        return value < limit ? Instant(kind: kind, nanoseconds: value) : nil
    }

    /// Encodes `nanoseconds` on `kind`'s clock; values at or past `limit` become FOREVER.
    /// Wall-clock values below 2 cannot be encoded (-1 is FOREVER); callers clamp them.
    @inline(__always)
    static func encode(_ kind: Kind, _ nanoseconds: UInt64) -> UInt64 {
        if nanoseconds >= limit { return forever }
        switch kind {
        case .uptime: return nanoseconds
        case .wall: return 0 &- nanoseconds
        case .boot: return nanoseconds | bootBit
        }
    }

    /// `dispatch_time(when, delta)`: the instant `delta` nanoseconds after `when`, on
    /// `when`'s clock. FOREVER stays FOREVER; a sum at or past `limit` is FOREVER.
    ///
    /// Going backwards past the start of a clock mirrors libdispatch: on the uptime and
    /// boot clocks the result is 1 (the earliest encodable instant: 0 would mean "now"), on
    /// the wall clock it is ~1 (DISPATCH_WALLTIME_NOW; both are already past when used as
    /// deadlines). One deliberate difference: libdispatch turns a wall-clock result of
    /// exactly 1 ns after the epoch into -1, which is FOREVER; we return ~1 like for every
    /// other underflow.
    static func time(_ when: UInt64, _ delta: Int64) -> UInt64 {
        guard let start = decode(when) else { return forever }
        if delta >= 0 {
            // start.nanoseconds < 2^62 and delta < 2^63: the sum cannot overflow.
            return encode(start.kind, start.nanoseconds + UInt64(delta))
        }
        let back = delta.magnitude
        switch start.kind {
        case .wall:
            return start.nanoseconds < back + 2 ? wallNow : encode(.wall, start.nanoseconds - back)
        case .uptime, .boot:
            return start.nanoseconds <= back ? encode(start.kind, 1) : encode(start.kind, start.nanoseconds - back)
        }
    }

    /// `dispatch_walltime(when, delta)`: the wall-clock instant `delta` nanoseconds after
    /// `*when` (or after the current time when `when` is nil).
    ///
    /// Differences from libdispatch, both at the edges: an instant at or before the epoch
    /// (after adding `delta`) is ~1, the past; libdispatch returns FOREVER for it when
    /// `delta >= 0` (an artefact of its overflow check). And an instant at or past `limit`
    /// (the year 2116) is FOREVER; libdispatch returns a value that decodes as the boot clock.
    static func walltime(_ when: UnsafePointer<timespec>?, _ delta: Int64) -> UInt64 {
        let base: Int64
        if let spec = when?.pointee {
            let (seconds, overflow) = Int64(spec.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
            let (sum, overflow2) = seconds.addingReportingOverflow(Int64(spec.tv_nsec))
            if overflow || overflow2 { return spec.tv_sec > 0 ? forever : wallNow }
            base = sum
        } else {
            base = Int64(bitPattern: gc_walltime_ns())
        }
        let (sum, overflow) = base.addingReportingOverflow(delta)
        if overflow { return delta > 0 ? forever : wallNow }
        if sum < 2 { return wallNow }
        return encode(.wall, UInt64(sum))
    }

    /// Nanoseconds from now until `deadline`, for a relative wait (a futex timeout):
    /// -1 for FOREVER (wait without a timeout), 0 when the deadline has already passed.
    /// Wall-clock and boot-clock deadlines are measured on their own clocks.
    @inline(__always)
    static func nanosecondsUntil(_ deadline: UInt64) -> Int64 {
        if deadline == now || deadline == wallNow || deadline == bootNow { return 0 }
        guard let instant = decode(deadline, resolvingNow: false) else { return -1 }
        let current = read(instant.kind)
        // instant.nanoseconds < limit < 2^62: the difference fits in Int64.
        return instant.nanoseconds > current ? Int64(instant.nanoseconds - current) : 0
    }
}
