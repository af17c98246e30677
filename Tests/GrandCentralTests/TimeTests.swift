import XCTest
import Glibc
import CGrandCentral
@testable import GrandCentral

// XCTest imports Foundation, which makes Swift's own Dispatch types visible too. These
// aliases pick ours; their names differ from the plain ones so that they cannot collide
// with module-wide aliases another test file may declare.
private typealias GCTime = GrandCentral.DispatchTime
private typealias GCWallTime = GrandCentral.DispatchWallTime
private typealias GCInterval = GrandCentral.DispatchTimeInterval
private typealias GCTimeoutResult = GrandCentral.DispatchTimeoutResult

private let second: Int64 = 1_000_000_000
private let millisecond: Int64 = 1_000_000

final class TimeTests: XCTestCase {
    // MARK: - dispatch_time_t encoding

    func testConstantsMatchLibdispatch() {
        XCTAssertEqual(DispatchClock.now, 0)
        XCTAssertEqual(DispatchClock.forever, ~0)
        XCTAssertEqual(DispatchClock.wallNow, ~1)
        XCTAssertEqual(DispatchClock.bootNow, 1 << 63)
        XCTAssertEqual(DispatchClock.limit, (1 << 62) - 1)
    }

    func testNowIsTheCurrentUptime() {
        let before = gc_uptime_ns()
        let now = DispatchClock.time(DispatchClock.now, 0)
        let after = gc_uptime_ns()
        XCTAssertGreaterThanOrEqual(now, before)
        XCTAssertLessThanOrEqual(now, after)
        XCTAssertEqual(now >> 63, 0, "uptime values have bit 63 clear")
    }

    func testEncodeDecodeRoundTripsOnEveryClock() {
        let values: [UInt64] = [1, 2, 3, 1_000, 1 << 40, DispatchClock.limit - 1]
        for kind in DispatchClock.Kind.allCases {
            for value in values {
                if kind == .wall && value < 3 { continue }  // -1 is FOREVER, -2 is WALLTIME_NOW
                let encoded = DispatchClock.encode(kind, value)
                XCTAssertNotEqual(encoded, DispatchClock.forever)
                XCTAssertEqual(DispatchClock.decode(encoded), DispatchClock.Instant(kind: kind, nanoseconds: value),
                               "\(kind) \(value)")
                XCTAssertEqual(DispatchClock.time(encoded, 0), encoded, "dispatch_time(t, 0) == t")
            }
            XCTAssertEqual(DispatchClock.encode(kind, DispatchClock.limit), DispatchClock.forever)
        }
        XCTAssertNil(DispatchClock.decode(DispatchClock.forever))
    }

    func testClockBitsOfEachEncoding() {
        XCTAssertEqual(DispatchClock.encode(.uptime, 12345), 12345)
        XCTAssertEqual(DispatchClock.encode(.boot, 12345), (1 << 63) | 12345)
        XCTAssertEqual(Int64(bitPattern: DispatchClock.encode(.wall, 12345)), -12345)
        XCTAssertEqual(DispatchClock.encode(.wall, 12345) >> 62, 3, "wall values have bits 63 and 62 set")
        XCTAssertEqual(DispatchClock.encode(.boot, 12345) >> 62, 2, "boot values have bit 63 set, 62 clear")
    }

    func testAdditionSaturatesToForever() {
        XCTAssertEqual(DispatchClock.time(DispatchClock.now, Int64.max), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time(DispatchClock.wallNow, Int64.max), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time(DispatchClock.bootNow, Int64.max), DispatchClock.forever)
        // The largest representable uptime is 2^62 - 2; one more saturates.
        XCTAssertEqual(DispatchClock.time((1 << 62) - 10, 8), (1 << 62) - 2)
        XCTAssertEqual(DispatchClock.time((1 << 62) - 10, 9), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time(1 << 62, 0), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time((1 << 63) - 1, 0), DispatchClock.forever)
        // FOREVER stays FOREVER, whatever the delta.
        XCTAssertEqual(DispatchClock.time(DispatchClock.forever, -1_000), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time(DispatchClock.forever, Int64.min), DispatchClock.forever)
        XCTAssertEqual(DispatchClock.time(DispatchClock.forever, 0), DispatchClock.forever)
    }

    func testUptimeUnderflowClampsToOneLikeLibdispatch() {
        XCTAssertEqual(DispatchClock.time(100, -99), 1)
        XCTAssertEqual(DispatchClock.time(100, -100), 1)
        XCTAssertEqual(DispatchClock.time(100, -1_000), 1)
        XCTAssertEqual(DispatchClock.time(DispatchClock.now, Int64.min), 1)
        XCTAssertEqual(DispatchClock.time(100, -98), 2)
        XCTAssertEqual(DispatchClock.time(DispatchClock.encode(.boot, 100), -1_000), DispatchClock.encode(.boot, 1))
    }

    func testWallClockEncodingIsNegated() {
        let before = Int64(bitPattern: gc_walltime_ns())
        let now = DispatchClock.walltime(nil, 0)
        let after = Int64(bitPattern: gc_walltime_ns())
        XCTAssertLessThan(Int64(bitPattern: now), 0)
        XCTAssertGreaterThanOrEqual(-Int64(bitPattern: now), before)
        XCTAssertLessThanOrEqual(-Int64(bitPattern: now), after)
        // Later wall-clock instants have smaller raw values.
        let later = DispatchClock.time(now, second)
        XCTAssertEqual(Int64(bitPattern: now) - Int64(bitPattern: later), second)
        // DISPATCH_WALLTIME_NOW resolves to the current wall-clock time.
        let resolved = DispatchClock.time(DispatchClock.wallNow, 0)
        XCTAssertGreaterThanOrEqual(-Int64(bitPattern: resolved), after)
        XCTAssertLessThan(-Int64(bitPattern: resolved) - after, second)
    }

    func testWalltimeFromTimespec() {
        var spec = timespec(tv_sec: 1, tv_nsec: 5)
        XCTAssertEqual(Int64(bitPattern: DispatchClock.walltime(&spec, 0)), -1_000_000_005)
        XCTAssertEqual(Int64(bitPattern: DispatchClock.walltime(&spec, 10)), -1_000_000_015)
        XCTAssertEqual(Int64(bitPattern: DispatchClock.walltime(&spec, -3)), -1_000_000_002)
        XCTAssertEqual(DispatchClock.walltime(&spec, Int64.max), DispatchClock.forever)
        var distant = timespec(tv_sec: Int(Int64.max / second), tv_nsec: 0)
        XCTAssertEqual(DispatchClock.walltime(&distant, 0), DispatchClock.forever, "past 2^62 ns saturates")
    }

    func testWallClockUnderflowIsWalltimeNow() {
        let thousand = DispatchClock.encode(.wall, 1_000)
        XCTAssertEqual(DispatchClock.time(thousand, -1_000), DispatchClock.wallNow)
        XCTAssertEqual(DispatchClock.time(thousand, -1_001), DispatchClock.wallNow)
        // libdispatch returns FOREVER here (1 ns after the epoch encodes as -1); we do not.
        XCTAssertEqual(DispatchClock.time(thousand, -999), DispatchClock.wallNow)
        XCTAssertEqual(DispatchClock.time(thousand, -997), DispatchClock.encode(.wall, 3))
        XCTAssertEqual(DispatchClock.time(DispatchClock.wallNow, Int64.min), DispatchClock.wallNow)
        XCTAssertEqual(DispatchClock.walltime(nil, Int64.min), DispatchClock.wallNow)
        var spec = timespec(tv_sec: 1, tv_nsec: 0)
        XCTAssertEqual(DispatchClock.walltime(&spec, -2 * second), DispatchClock.wallNow)
    }

    func testBootClockNow() {
        let boot = DispatchClock.time(DispatchClock.bootNow, 0)
        XCTAssertEqual(boot >> 62, 2)
        let instant = DispatchClock.decode(boot)
        XCTAssertEqual(instant?.kind, .boot)
        XCTAssertGreaterThan(instant?.nanoseconds ?? 0, 0)
    }

    func testNanosecondsUntil() {
        XCTAssertEqual(DispatchClock.nanosecondsUntil(DispatchClock.forever), -1)
        XCTAssertEqual(DispatchClock.nanosecondsUntil(DispatchClock.now), 0)
        XCTAssertEqual(DispatchClock.nanosecondsUntil(DispatchClock.wallNow), 0)
        XCTAssertEqual(DispatchClock.nanosecondsUntil(DispatchClock.bootNow), 0)
        XCTAssertEqual(DispatchClock.nanosecondsUntil(1), 0, "a past uptime")
        XCTAssertEqual(DispatchClock.nanosecondsUntil(DispatchClock.encode(.wall, 5)), 0, "a past wall time")
        XCTAssertEqual(DispatchClock.nanosecondsUntil(1 << 62), -1, "unrepresentable counts as forever")
        for start in [DispatchClock.now, DispatchClock.wallNow, DispatchClock.bootNow] {
            let deadline = DispatchClock.time(start, second)
            let wait = DispatchClock.nanosecondsUntil(deadline)
            XCTAssertLessThanOrEqual(wait, second)
            XCTAssertGreaterThan(wait, second / 2, "\(start)")
            let past = DispatchClock.time(start, -second)
            XCTAssertEqual(DispatchClock.nanosecondsUntil(past), 0)
        }
    }

    // MARK: - DispatchTime

    func testDispatchTimeBasics() {
        let a = GCTime.now()
        let b = GCTime.now()
        XCTAssertLessThanOrEqual(a, b)
        XCTAssertGreaterThan(a.uptimeNanoseconds, 0)
        XCTAssertEqual(GCTime.distantFuture.rawValue, ~0)
        XCTAssertEqual(GCTime.distantFuture.uptimeNanoseconds, UInt64.max)
        XCTAssertLessThan(a, GCTime.distantFuture)
        XCTAssertEqual(GCTime(uptimeNanoseconds: 12345).rawValue, 12345)
        XCTAssertEqual(GCTime(uptimeNanoseconds: 12345).uptimeNanoseconds, 12345)
        XCTAssertEqual(GCTime(uptimeNanoseconds: 0).rawValue, DispatchClock.now, "0 is DISPATCH_TIME_NOW")
        XCTAssertEqual(GCTime(uptimeNanoseconds: 5), GCTime(uptimeNanoseconds: 5))
    }

    func testDispatchTimeArithmetic() {
        let t = GCTime(uptimeNanoseconds: 10 * UInt64(second))
        XCTAssertEqual((t + .seconds(2)).uptimeNanoseconds, 12 * UInt64(second))
        XCTAssertEqual((t + .milliseconds(3)).uptimeNanoseconds, 10 * UInt64(second) + 3 * UInt64(millisecond))
        XCTAssertEqual((t + .microseconds(4)).uptimeNanoseconds, 10 * UInt64(second) + 4_000)
        XCTAssertEqual((t + .nanoseconds(5)).uptimeNanoseconds, 10 * UInt64(second) + 5)
        XCTAssertEqual((t - .seconds(2)).uptimeNanoseconds, 8 * UInt64(second))
        XCTAssertEqual((t + 1.5).uptimeNanoseconds, 11 * UInt64(second) + 500 * UInt64(millisecond))
        XCTAssertEqual((t - 1.5).uptimeNanoseconds, 8 * UInt64(second) + 500 * UInt64(millisecond))
        XCTAssertLessThan(t, t + .nanoseconds(1))
    }

    func testDispatchTimeSaturates() {
        let now = GCTime.now()
        XCTAssertEqual(now + .never, .distantFuture)
        XCTAssertEqual(now + .seconds(Int.max), .distantFuture)
        XCTAssertEqual(now + .milliseconds(Int.max), .distantFuture)
        XCTAssertEqual(now + Double.infinity, .distantFuture)
        XCTAssertEqual(now + Double.nan, .distantFuture, "NaN counts as forever, as in Swift's Dispatch")
        XCTAssertEqual(now + 1e300, .distantFuture)
        XCTAssertEqual((now - .never).rawValue, 1)
        XCTAssertEqual((now - .seconds(Int.max)).rawValue, 1)
        XCTAssertEqual((now + .nanoseconds(Int.min)).rawValue, 1)
        XCTAssertEqual((now - Double.infinity).rawValue, 1)
        // Swift's Dispatch traps here; we saturate.
        XCTAssertEqual(now - .nanoseconds(Int.min), .distantFuture)
        XCTAssertEqual(GCTime.distantFuture - .seconds(1), .distantFuture)
    }

    func testDispatchTimeIntervalEquality() {
        XCTAssertEqual(GCInterval.seconds(1), .milliseconds(1_000))
        XCTAssertEqual(GCInterval.milliseconds(1), .microseconds(1_000))
        XCTAssertEqual(GCInterval.microseconds(1), .nanoseconds(1_000))
        XCTAssertEqual(GCInterval.seconds(2), .nanoseconds(2_000_000_000))
        XCTAssertNotEqual(GCInterval.seconds(1), .seconds(2))
        XCTAssertEqual(GCInterval.never, .never)
        XCTAssertEqual(GCInterval.seconds(Int.max), .milliseconds(Int.max), "both saturate")
        XCTAssertEqual(GCInterval.seconds(Int.min), .milliseconds(Int.min))
        XCTAssertNotEqual(GCInterval.seconds(Int.max), .never)
        XCTAssertNotEqual(GCInterval.never, .nanoseconds(Int.max))
        XCTAssertEqual(GCInterval.never.nanosecondCount, Int64.max)
    }

    // MARK: - DispatchWallTime

    func testDispatchWallTime() {
        let now = GCWallTime.now()
        XCTAssertLessThan(Int64(bitPattern: now.rawValue), 0)
        XCTAssertLessThan(now, now + 1.0)
        XCTAssertLessThan(now - .seconds(1), now)
        XCTAssertLessThan(now, .distantFuture)
        XCTAssertFalse(GCWallTime.distantFuture < now)
        XCTAssertFalse(GCWallTime.distantFuture < .distantFuture)
        XCTAssertEqual(Int64(bitPattern: now.rawValue) - Int64(bitPattern: (now + .milliseconds(250)).rawValue),
                       250 * millisecond)
        XCTAssertEqual(now + .never, .distantFuture)
        XCTAssertEqual(now + Double.infinity, .distantFuture)
        XCTAssertEqual((now - .never).rawValue, DispatchClock.wallNow)
        XCTAssertEqual((now - .nanoseconds(Int.min)), .distantFuture)
        let spec = GCWallTime(timespec: timespec(tv_sec: 1, tv_nsec: 0))
        XCTAssertEqual(Int64(bitPattern: spec.rawValue), -second)
        XCTAssertEqual(Int64(bitPattern: (spec + 0.5).rawValue), -(second + second / 2))
        XCTAssertLessThan(spec, now)
        XCTAssertEqual(spec - 5.0, GCWallTime(rawValue: DispatchClock.wallNow), "underflow")
    }

    func testTimeoutResultAndSendability() {
        func requireSendable<T: Sendable>(_: T.Type) {}
        requireSendable(GCTime.self)
        requireSendable(GCWallTime.self)
        requireSendable(GCInterval.self)
        requireSendable(GCTimeoutResult.self)
        XCTAssertNotEqual(GCTimeoutResult.success, .timedOut)
    }
}
