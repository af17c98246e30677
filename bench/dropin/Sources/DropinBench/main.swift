// Each case prints one line, "<case>\t<nanoseconds per unit>", where the unit is named in
// the case (a child task, an actor call, a wake-up's lateness, …). Lower is better.
// bench/run-dropin.sh runs this binary in fresh processes on each library and keeps each
// side's best run.
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

let quick = CommandLine.arguments.contains("--quick")
let scale = quick ? 10 : 1

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func report(_ name: String, _ totalNanoseconds: UInt64, per units: Int) {
    let tenths = (totalNanoseconds * 10 + UInt64(units) / 2) / UInt64(units)
    print("\(name)\t\(tenths / 10).\(tenths % 10)")
}

actor Counter {
    var value = 0
    func increment() { value += 1 }
}

/// A counter touched only from one serial queue (or after that queue's last item).
final class Tally: @unchecked Sendable { var value = 0 }

@inline(never) func leaf(_ x: Int) -> Int { x &* 2654435761 }

func taskGroup() async {
    let n = 100_000 / scale
    let start = now()
    let sum = await withTaskGroup(of: Int.self) { group in
        for i in 0..<n { group.addTask { leaf(i) } }
        var sum = 0
        for await v in group { sum &+= v }
        return sum
    }
    precondition(sum != 1)
    report("task group, per child task", now() - start, per: n)
}

func actorCalls() async {
    let counter = Counter()
    let tasks = 8, calls = 20_000 / scale
    let start = now()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<tasks {
            group.addTask { for _ in 0..<calls { await counter.increment() } }
        }
    }
    let total = await counter.value
    precondition(total == tasks * calls)
    report("actor, 8 tasks, per call", now() - start, per: tasks * calls)
}

func sleepLateness() async {
    let n = 200 / scale
    var lateness: [UInt64] = []
    lateness.reserveCapacity(n)
    for _ in 0..<n {
        let start = now()
        try? await Task.sleep(nanoseconds: 1_000_000)
        let elapsed = now() - start
        lateness.append(elapsed > 1_000_000 ? elapsed - 1_000_000 : 0)
    }
    lateness.sort()
    report("Task.sleep(1 ms) lateness p50", lateness[n / 2], per: 1)
}

func asyncLetFanOut() async {
    let rounds = 20_000 / scale
    let start = now()
    var sum = 0
    for i in 0..<rounds {
        async let a = leaf(i)
        async let b = leaf(i + 1)
        async let c = leaf(i + 2)
        async let d = leaf(i + 3)
        sum &+= await a &+ b &+ c &+ d
    }
    precondition(sum != 1)
    report("async let x4, per child", now() - start, per: rounds * 4)
}

func continuations() async {
    let queue = DispatchQueue(label: "bench.resumer")
    let n = 100_000 / scale
    let start = now()
    for _ in 0..<n {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            queue.async { c.resume() }
        }
    }
    report("continuation resumed from a queue", now() - start, per: n)
}

func queueAsyncThenSync() {
    let queue = DispatchQueue(label: "bench.serial")
    let n = 1_000_000 / scale
    let count = Tally()
    let start = now()
    for _ in 0..<n { queue.async { count.value += 1 } }
    queue.sync {}
    precondition(count.value == n)
    report("queue.async + final sync, per item", now() - start, per: n)
}

func queueSync() {
    let queue = DispatchQueue(label: "bench.sync")
    let n = 1_000_000 / scale
    let count = Tally()
    let start = now()
    for _ in 0..<n { queue.sync { count.value += 1 } }
    precondition(count.value == n)
    report("queue.sync", now() - start, per: n)
}

func concurrentPerform() {
    let rounds = 2_000 / scale
    let start = now()
    for _ in 0..<rounds {
        DispatchQueue.concurrentPerform(iterations: 1000) { i in _ = leaf(i) }
    }
    report("concurrentPerform(1000), per call", now() - start, per: rounds)
}

func groupEnterLeave() {
    let group = DispatchGroup()
    let n = 1_000_000 / scale
    let start = now()
    for _ in 0..<n { group.enter(); group.leave() }
    group.wait()
    report("group enter + leave", now() - start, per: n)
}

/// The file this process mapped as libdispatch, from the loader's own record.
func mappedDispatch() -> String {
    guard let maps = fopen("/proc/self/maps", "r") else { return "?" }
    defer { fclose(maps) }
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), maps) != nil {
        let text = String(cString: line)
        if let slash = text.firstIndex(of: "/"), text.contains("libdispatch.so") || text.contains("libgrandcentral.so") {
            return String(text[slash...].dropLast())
        }
    }
    return "?"
}

if CommandLine.arguments.contains("--which") {
    print(mappedDispatch())
    exit(0)
}

/// `--only a,b`: run only the cases whose names (as below) are listed, for profiling one.
let only: Set<Substring>? = CommandLine.arguments.firstIndex(of: "--only").flatMap { i in
    i + 1 < CommandLine.arguments.count ? Set(CommandLine.arguments[i + 1].split(separator: ",")) : nil
}
func selected(_ name: Substring) -> Bool { only?.contains(name) ?? true }

if selected("taskgroup") { await taskGroup() }
if selected("actor") { await actorCalls() }
if selected("sleep") { await sleepLateness() }
if selected("asynclet") { await asyncLetFanOut() }
if selected("continuation") { await continuations() }
if selected("asyncsync") { queueAsyncThenSync() }
if selected("sync") { queueSync() }
if selected("perform") { concurrentPerform() }
if selected("group") { groupEnterLeave() }
