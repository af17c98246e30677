import Dispatch
import Foundation

/// dispatchMain() owns the main thread: the main queue, global queues, a group, asyncAfter,
/// concurrentPerform, a serial queue's order, a barrier; the last item exits.
func dispatchMainCase() {
    let serial = DispatchQueue(label: "dropin.serial")
    var order: [Int] = []
    for i in 0..<100 { serial.async { order.append(i) } }
    serial.sync {}
    say("serial queue ran 100 items in order: \(order == Array(0..<100))")

    let group = DispatchGroup()
    let lock = NSLock()
    var total = 0
    for i in 1...100 {
        DispatchQueue.global().async(group: group) {
            lock.lock(); total += i; lock.unlock()
        }
    }
    group.wait()
    say("group: total \(total)")

    var slots = [Int](repeating: 0, count: 1000)
    slots.withUnsafeMutableBufferPointer { buffer in
        DispatchQueue.concurrentPerform(iterations: 1000) { buffer[$0] = $0 * 2 }
    }
    say("concurrentPerform: sum \(slots.reduce(0, +))")

    let concurrent = DispatchQueue(label: "dropin.concurrent", attributes: .concurrent)
    var log: [String] = []
    let logLock = NSLock()
    for _ in 0..<10 { concurrent.async { logLock.lock(); log.append("r"); logLock.unlock() } }
    concurrent.async(flags: .barrier) { logLock.lock(); log.append("barrier"); logLock.unlock() }
    concurrent.sync {}
    say("barrier ran after the 10 readers: \(log.count == 11 && log.last == "barrier")")

    let key = DispatchSpecificKey<String>()
    serial.setSpecific(key: key, value: "serial")
    say("getSpecific on the queue: \(serial.sync { DispatchQueue.getSpecific(key: key) ?? "nil" })")

    var mainOrder: [Int] = []
    for i in 0..<5 {
        DispatchQueue.main.async {
            dispatchPrecondition(condition: .onQueue(.main))
            mainOrder.append(i)
        }
    }
    DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(30)) {
        say("main queue items in order: \(mainOrder)")
        DispatchQueue.global().async {
            DispatchQueue.main.sync { say("sync onto the main queue from a worker") }
            DispatchQueue.main.async {
                say("dispatchMain: done")
                exit(0)
            }
        }
    }
    dispatchMain()
}
