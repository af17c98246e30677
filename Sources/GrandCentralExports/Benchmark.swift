import CGrandCentral

// dispatch_benchmark_f: average nanoseconds per call of `function`, after subtracting the
// cost of the timing loop itself (as libdispatch does).

@_cdecl("dispatch_benchmark_f")
public func dispatch_benchmark_f(_ count: Int, _ context: UnsafeMutableRawPointer?, _ function: dispatch_function_t?) -> UInt64 {
    let f = work(function, "dispatch_benchmark_f")
    if count == 0 { return 0 }
    let emptyStart = gc_uptime_ns()
    for _ in 0..<count { emptyBenchmarkBody(nil) }
    let overhead = gc_uptime_ns() &- emptyStart
    let start = gc_uptime_ns()
    for _ in 0..<count { f(context) }
    let elapsed = gc_uptime_ns() &- start
    let net = elapsed > overhead ? elapsed - overhead : 0
    return net / UInt64(count)
}

private let emptyBenchmarkBody: dispatch_function_t = { _ in }
