import Foundation
import GrandCentral

// An `async` main: the Swift concurrency runtime owns the main thread (through the
// toolchain's libdispatch main queue). GrandCentral's main queue must still run there, in
// order, interleaved with @MainActor work, and `.onQueue(.main)` must hold in its items.

/// Touched only on the main actor.
@MainActor var order: [String] = []

@MainActor func record(_ what: String) { order.append(what) }

/// An actor whose code runs on a GrandCentral serial queue (its executor).
actor Account {
    let queue = DispatchSerialQueue(label: "com.example.account")
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    private var balance = 0

    func deposit(_ amount: Int) -> Int {
        dispatchPrecondition(condition: .onQueue(queue))
        balance += amount
        return balance
    }
}

@main
struct AsyncMain {
    static func main() async {
        record("actor-0")
        let producer = DispatchQueue(label: "com.example.async-main.producer")
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            producer.async {
                for i in 0..<50 {
                    DispatchQueue.main.async {
                        dispatchPrecondition(condition: .onQueue(.main))
                        MainActor.assumeIsolated { record("gc-\(i)") }
                        if i == 49 { finished.resume() }
                    }
                }
            }
        }
        record("actor-1")
        let items = order.filter { $0.hasPrefix("gc-") }
        precondition(items == (0..<50).map { "gc-\($0)" }, "main queue order: \(items)")
        precondition(order.first == "actor-0" && order.last == "actor-1")

        // @MainActor work from a task elsewhere and GrandCentral's main queue, side by side.
        let fromTask = Task.detached { await MainActor.run { record("task"); return 1 } }
        let viaQueue = await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
            DispatchQueue.global().async {
                DispatchQueue.main.async { MainActor.assumeIsolated { record("queue") }; c.resume(returning: 2) }
            }
        }
        let sum = await fromTask.value + viaQueue
        precondition(sum == 3 && order.contains("task") && order.contains("queue"))
        print("async-main: 50 GrandCentral main-queue items ran in order on the main actor's thread, beside @MainActor tasks")

        let account = Account()
        let total = await withTaskGroup(of: Int.self, returning: Int.self) { group in
            for _ in 0..<100 { group.addTask { await account.deposit(1) } }
            var highest = 0
            for await balance in group { highest = max(highest, balance) }
            return highest
        }
        precondition(total == 100, "balance \(total)")
        print("async-main: an actor on a DispatchSerialQueue took 100 concurrent deposits: \(total)")
    }
}
