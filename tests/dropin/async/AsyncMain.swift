import Dispatch
import Foundation

actor Counter {
    private(set) var value = 0
    func add(_ n: Int) { value += n }
}

@MainActor final class MainState {
    static let shared = MainState()
    var hops = 0
    func hop() { hops += 1 }
}

/// An async main (the runtime drives the main thread: dispatch_main, or the run loop when
/// Foundation is loaded): task groups, an actor under contention, Task.sleep, cancellation,
/// @MainActor hops, a continuation resumed from a queue, async let.
@main struct AsyncMain {
    static func main() async {
        let squares = await withTaskGroup(of: Int.self) { group in
            for i in 0..<1000 { group.addTask { i * i } }
            var sum = 0
            for await value in group { sum += value }
            return sum
        }
        say("task group: sum of squares below 1000 = \(squares)")

        let counter = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<2000 { await counter.add(1) } }
            }
        }
        say("actor: \(await counter.value) increments")

        let start = DispatchTime.now()
        try? await Task.sleep(nanoseconds: 20_000_000)
        let slept = DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds
        say("Task.sleep(20 ms) slept at least 20 ms: \(slept >= 20_000_000)")

        let sleeper = Task { () -> String in
            do {
                try await Task.sleep(nanoseconds: 10_000_000_000)
                return "not cancelled"
            } catch is CancellationError {
                return "cancelled"
            } catch {
                return "other error"
            }
        }
        try? await Task.sleep(nanoseconds: 5_000_000)
        sleeper.cancel()
        say("cancellation: \(await sleeper.value)")

        let child = Task { () -> Bool in
            await withTaskCancellationHandler {
                while !Task.isCancelled { await Task.yield() }
                return Task.isCancelled
            } onCancel: {}
        }
        child.cancel()
        say("cooperative cancellation seen: \(await child.value)")

        for _ in 0..<100 {
            await MainState.shared.hop()
            await Task.detached { await Task.yield() }.value
        }
        say("@MainActor hops: \(await MainState.shared.hops)")
        let onMainQueue = await MainActor.run { () -> Bool in
            dispatchPrecondition(condition: .onQueue(.main))
            return true
        }
        say("MainActor.run is on the main queue: \(onMainQueue)")

        let value = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { continuation.resume(returning: 42) }
        }
        say("continuation resumed from a queue: \(value)")

        async let a = compute(10)
        async let b = compute(20)
        say("async let: \(await a + b)")
    }
}

func compute(_ n: Int) async -> Int {
    try? await Task.sleep(nanoseconds: 1_000_000)
    return n * 2
}
