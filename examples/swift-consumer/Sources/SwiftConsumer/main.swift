import GrandCentral

// An isolation queue guarding a counter, a fan-out with a group, concurrentPerform,
// a semaphore, a work item, queue-specific data, asyncAfter and a precondition.

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
print("swift-consumer: all checks passed")
