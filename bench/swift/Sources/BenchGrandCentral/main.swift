// One Swift benchmark, two builds: BENCH_GRANDCENTRAL picks the module. Each case prints
// `case<TAB>nanoseconds per call`, the best of several rounds.
#if BENCH_GRANDCENTRAL
import GrandCentral
#else
import Dispatch
#endif
import Glibc

/// CLOCK_MONOTONIC in nanoseconds.
func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Runs `body(iterations)` a few times and prints the best time per call.
func measure(_ name: String, iterations: Int, rounds: Int = 5, _ body: (Int) -> Void) {
    body(iterations / 10)  // warm up
    var best = UInt64.max
    for _ in 0..<rounds {
        let start = now()
        body(iterations)
        best = min(best, now() - start)
    }
    print("\(name)\t\(Double(best) / Double(iterations))")
}

final class Box: @unchecked Sendable { var value = 0 }
struct Failure: Error {}

let quick = CommandLine.arguments.contains("--quick")
let n = quick ? 200_000 : 1_000_000
let queue = DispatchQueue(label: "bench.serial")
let concurrent = DispatchQueue(label: "bench.concurrent", attributes: .concurrent)
let box = Box()

measure("sync { counter += 1 }", iterations: n) { count in
    for _ in 0..<count { queue.sync { box.value += 1 } }
}
measure("sync { value } -> Int", iterations: n) { count in
    var total = 0
    for _ in 0..<count { total &+= queue.sync { box.value } }
    box.value = total
}
measure("try sync { throws } -> Int", iterations: n) { count in
    var total = 0
    for i in 0..<count {
        total &+= (try? queue.sync { () throws -> Int in
            if i < 0 { throw Failure() }
            return box.value
        }) ?? 0
    }
    box.value = total
}
measure("async + final sync", iterations: n) { count in
    for _ in 0..<count { queue.async { box.value += 1 } }
    queue.sync {}
}
let group = DispatchGroup()
measure("async(group:) + wait", iterations: n) { count in
    for _ in 0..<count { concurrent.async(group: group) {} }
    group.wait()
}
measure("group enter/leave", iterations: n) { count in
    for _ in 0..<count { group.enter(); group.leave() }
}
let semaphore = DispatchSemaphore(value: 0)
measure("semaphore signal/wait", iterations: n) { count in
    for _ in 0..<count { semaphore.signal(); semaphore.wait() }
}
measure("concurrentPerform(iterations: 1000)", iterations: quick ? 200 : 1_000) { count in
    for _ in 0..<count {
        DispatchQueue.concurrentPerform(iterations: 1000) { _ in }
    }
}
measure("DispatchWorkItem perform", iterations: n) { count in
    for _ in 0..<count { DispatchWorkItem { box.value += 1 }.perform() }
}
