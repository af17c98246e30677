// Interval sources (libdispatch's private DISPATCH_SOURCE_TYPE_INTERVAL): a timer source
// whose schedule is given as "every `handle` milliseconds" (or, with
// DISPATCH_INTERVAL_UI_ANIMATION in the mask, every `handle` frames of 1/60 s), and whose
// fires fall on multiples of the interval on the uptime clock, so every interval source
// with the same interval fires in phase. It is an ordinary timer underneath (the same
// SourceTimer monitor); only the translation of the schedule is its own.
//
// As libdispatch on Linux (observed with the toolchain's library): creation arms the
// schedule at once (dispatch_source_set_timer(NOW, handle, ~0)); the first fire is at the
// next multiple of the interval; the default leeway is half the interval (one frame for
// animation); dispatch_source_get_handle returns 1 (its uptime clock id) and
// dispatch_source_get_mask the mask with 0x10 (its "interval" timer flag) added. On such a
// source, dispatch_source_set_timer takes start NOW or FOREVER only, the interval in the
// source's unit, and a leeway in thousandths of the interval (0 ... 1000) or ~0 for the
// default; anything else is a client bug, as there.

extension SourceCore {
    /// What dispatch_source_get_handle / _get_mask report for an interval source.
    static let intervalHandle: UInt = 1
    static let intervalMaskFlag: UInt = 0x10

    /// About a year, libdispatch's cap on an interval.
    private static let intervalCap: UInt64 = 31_536_000_000_000_000

    /// `dispatch_source_set_timer` on an interval source; see above.
    func setIntervalTimer(start: UInt64, interval: UInt64, leeway: UInt64, caller: StaticString) {
        if start == DispatchClock.forever {
            setTimer(start: DispatchClock.forever, interval: DispatchClock.forever, leeway: DispatchClock.forever,
                     caller: caller)
            return
        }
        if start != DispatchClock.now { clientBug(caller, "interval source: start is not DISPATCH_TIME_NOW or DISPATCH_TIME_FOREVER") }
        if interval == 0 { clientBug(caller, "interval source: interval is 0") }
        let animation = mask & SourceType.intervalAnimation != 0
        let unit: UInt64 = animation ? 1_000_000_000 / 60 : 1_000_000
        let nanoseconds = interval <= Self.intervalCap / unit ? interval * unit : Self.intervalCap
        var first = DispatchClock.read(.uptime) + nanoseconds
        first -= first % nanoseconds
        let slack: UInt64
        if leeway <= 1000 {
            slack = nanoseconds.multipliedReportingOverflow(by: leeway).overflow
                ? nanoseconds / 1000 * leeway : nanoseconds * leeway / 1000
        } else if leeway == ~0 {
            slack = animation ? unit : nanoseconds / 2
        } else {
            clientBug(caller, "interval source: leeway is neither 0 ... 1000 nor ~0")
        }
        setTimer(start: DispatchClock.encode(.uptime, max(first, 1)), interval: nanoseconds, leeway: slack,
                 caller: caller)
    }
}
