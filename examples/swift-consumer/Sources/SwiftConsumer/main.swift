import Foundation
import GrandCentral

// Everyday Dispatch code, with Foundation imported beside GrandCentral: DispatchAliases.swift
// (a copy of Aliases/DispatchAliases.swift) makes the plain names mean GrandCentral's. The
// same file builds as SwiftConsumer (Swift 6 language mode) and SwiftConsumer5 (Swift 5).
//
// An isolation queue guarding a counter, a fan-out with a group, concurrentPerform,
// a semaphore, work items, queue-specific data, asyncAfter and preconditions.

/// State confined to `isolation`: only touched from blocks running on it.
final class Counter: @unchecked Sendable { var value = 0 }

let isolation = DispatchQueue(label: "com.example.counter", qos: .userInitiated)
let counter = Counter()
let group = DispatchGroup()
for _ in 0..<100 {
    DispatchQueue.global().async(group: group) {
        isolation.async { counter.value += 1 }
    }
}
group.wait()
let total = isolation.sync { counter.value }
precondition(total == 100, "counter is \(total)")
print("swift-consumer: 100 increments through a serial queue: \(total)")

/// Each iteration writes its own slot.
struct Slots: @unchecked Sendable { let base: UnsafeMutablePointer<Int> }
let slots = Slots(base: .allocate(capacity: 1000))
DispatchQueue.concurrentPerform(iterations: 1000) { i in slots.base[i] = i * i }
precondition(UnsafeBufferPointer(start: slots.base, count: 1000).reduce(0, +) == 332_833_500)
print("swift-consumer: concurrentPerform computed 1000 squares")

let key = DispatchSpecificKey<String>()
isolation.setSpecific(key: key, value: "isolation")
let child = DispatchQueue(label: "com.example.child", target: isolation)
let seen = child.sync { DispatchQueue.getSpecific(key: key) }
precondition(seen == "isolation")
print("swift-consumer: getSpecific walks the target chain: \(seen ?? "nil")")

struct Failure: Error {}
do {
    try isolation.sync { throw Failure() }
    preconditionFailure("sync did not rethrow")
} catch {
    print("swift-consumer: sync rethrows: \(error)")
}

let item = DispatchWorkItem { dispatchPrecondition(condition: .onQueue(isolation)) }
isolation.async(execute: item)
precondition(item.wait(timeout: .now() + 5) == .success)

let fired = DispatchSemaphore(value: 0)
let start = DispatchTime.now()
DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .milliseconds(50)) { fired.signal() }
precondition(fired.wait(timeout: .now() + 5) == .success)
let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
precondition(elapsed >= 50)
print("swift-consumer: asyncAfter(50 ms) fired after \(Int(elapsed)) ms")
/// Not Sendable: Dispatch accepts closures that capture it where it does not ask for
/// @Sendable (a work item's block, group and work-item notifications); so does GrandCentral.
final class Tally { var count = 0 }

func plainClosures() {
    let tally = Tally()
    let item = DispatchWorkItem { tally.count += 1 }
    let done = DispatchSemaphore(value: 0)
    item.notify(queue: isolation) { tally.count += 10; done.signal() }
    isolation.async(execute: item)
    done.wait()
    let group = DispatchGroup()
    group.enter()
    group.notify(queue: isolation) { tally.count += 100; done.signal() }
    group.leave()
    done.wait()
    isolation.sync { precondition(tally.count == 111, "tally is \(tally.count)") }
    print("swift-consumer: non-Sendable closures in work items and notifications: \(tally.count)")
}
plainClosures()

let legacy = DispatchQueue.global(priority: .high)
precondition(legacy === DispatchQueue.global(qos: .userInitiated))
legacy.sync { dispatchPrecondition(condition: .onQueue(legacy), file: #file, line: #line) }
let started = Date()
print("swift-consumer: global(priority: .high) is the user-initiated queue; Foundation's Date beside it: \(started.timeIntervalSince1970 > 0)")
print("swift-consumer: all checks passed")
