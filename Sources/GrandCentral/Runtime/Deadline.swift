import CGrandCentral

/// Turns a `dispatch_time_t` deadline into a relative wait for the futex: -1 for
/// DISPATCH_TIME_FOREVER, 0 when the deadline has passed.
@inline(__always)
func relativeTimeout(_ deadline: UInt64) -> Int64 {
    if deadline == ~0 { return -1 }
    if deadline == 0 || deadline == ~1 { return 0 }
    if deadline & (1 << 63) != 0 {
        // Wall clock: stored negated.
        let wall = UInt64(bitPattern: -Int64(bitPattern: deadline))
        let now = gc_walltime_ns()
        return wall > now ? Int64(min(wall - now, UInt64(Int64.max))) : 0
    }
    let now = gc_uptime_ns()
    return deadline > now ? Int64(deadline - now) : 0
}
