// DispatchTime and DispatchTimeInterval as a client sees them (black box, checked against the
// toolchain's Dispatch; TimeTests.swift tests the dispatch_time_t encoding from the inside):
// intervals convert exactly, overflow saturates to distantFuture, .never is forever, and equal
// durations in different units are equal.

import GrandCentral
import XCTest

final class TimeArithmeticTests: XCTestCase {

    func testNowMovesForward() {
        let first = DispatchTime.now()
        sleep(milliseconds: 2)
        let second = DispatchTime.now()
        XCTAssertLessThan(first, second)
        XCTAssertGreaterThanOrEqual(second.uptimeNanoseconds - first.uptimeNanoseconds, 2_000_000)
    }

    func testAddingIntervalsIsExact() {
        let base = DispatchTime(uptimeNanoseconds: 1_000_000_000_000)
        XCTAssertEqual((base + .seconds(3)).uptimeNanoseconds, 1_003_000_000_000)
        XCTAssertEqual((base + .milliseconds(5)).uptimeNanoseconds, 1_000_005_000_000)
        XCTAssertEqual((base + .microseconds(7)).uptimeNanoseconds, 1_000_000_007_000)
        XCTAssertEqual((base + .nanoseconds(9)).uptimeNanoseconds, 1_000_000_000_009)
        XCTAssertEqual((base + 0.25).uptimeNanoseconds, 1_000_250_000_000)
        XCTAssertEqual((base - .seconds(1)).uptimeNanoseconds, 999_000_000_000)
        XCTAssertEqual((base - 0.5).uptimeNanoseconds, 999_500_000_000)
    }

    func testUptimeNanosecondsRoundTrips() {
        let time = DispatchTime(uptimeNanoseconds: 123_456_789_012)
        XCTAssertEqual(time.uptimeNanoseconds, 123_456_789_012)
        XCTAssertEqual(time, DispatchTime(uptimeNanoseconds: 123_456_789_012))
    }

    func testDistantFutureIsLaterThanAnyRealTime() {
        let now = DispatchTime.now()
        XCTAssertLessThan(now + .seconds(100 * 365 * 24 * 3600), .distantFuture)
        XCTAssertEqual(DispatchTime.distantFuture.uptimeNanoseconds, UInt64.max)
    }

    func testNeverAndOverflowSaturateToDistantFuture() {
        let now = DispatchTime.now()
        XCTAssertEqual(now + .never, .distantFuture)
        XCTAssertEqual(now + .seconds(Int.max), .distantFuture)
        XCTAssertEqual(DispatchTime.distantFuture + .seconds(1), .distantFuture)
        XCTAssertEqual(DispatchTime.distantFuture - .seconds(1), .distantFuture)
    }

    func testIntervalsCompareByDuration() {
        XCTAssertEqual(DispatchTimeInterval.seconds(1), .milliseconds(1000))
        XCTAssertEqual(DispatchTimeInterval.milliseconds(3), .microseconds(3000))
        XCTAssertEqual(DispatchTimeInterval.microseconds(2), .nanoseconds(2000))
        XCTAssertNotEqual(DispatchTimeInterval.seconds(1), .seconds(2))
        XCTAssertEqual(DispatchTimeInterval.never, .never)
        XCTAssertNotEqual(DispatchTimeInterval.never, .seconds(1))
    }

    func testTimeoutResultsAreDistinct() {
        XCTAssertNotEqual(DispatchTimeoutResult.success, .timedOut)
        XCTAssertEqual(DispatchTimeoutResult.timedOut, .timedOut)
    }
}
