import Dispatch
import Foundation

/// RunLoop.main owns the main thread: Timer, the main queue, OperationQueue.main and
/// perform(block:) interleave in the orders each promises; a repeating timer stops itself.
func runLoopCase() {
    var events: [String] = []
    DispatchQueue.main.async { events.append("main queue 1") }
    OperationQueue.main.addOperation { events.append("operation queue main") }
    DispatchQueue.main.async { events.append("main queue 2") }
    var ticks = 0
    let timer = Timer(timeInterval: 0.01, repeats: true) { timer in
        ticks += 1
        if ticks == 3 {
            timer.invalidate()
            events.append("timer fired 3 times")
            DispatchQueue.main.async { events.append("main queue from the timer") }
        }
    }
    RunLoop.main.add(timer, forMode: .default)
    DispatchQueue.global().async {
        DispatchQueue.main.async { events.append("main queue from a worker") }
    }
    // Main-queue work that queues itself again must not starve the run loop's timers.
    var spins = 0
    func spin() {
        spins += 1
        if spins < 1_000_000 && ticks < 3 { DispatchQueue.main.async(execute: spin) }
    }
    DispatchQueue.main.async(execute: spin)

    let deadline = Date().addingTimeInterval(10)
    while ticks < 3 || !events.contains("main queue from the timer") || !events.contains("main queue from a worker") {
        if Date() > deadline { say("run loop: timed out: \(events)"); exit(1) }
        RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.05))
    }
    say("run loop: main queue 1 before main queue 2: \(events.firstIndex(of: "main queue 1")! < events.firstIndex(of: "main queue 2")!)")
    say("run loop: OperationQueue.main ran: \(events.contains("operation queue main"))")
    say("run loop: the timer fired while main-queue work kept requeueing itself: \(spins < 1_000_000)")
    say("run loop: \(events.filter { $0.hasPrefix("timer") })")
    say("run loop: main queue from the timer ran after it: \(events.firstIndex(of: "main queue from the timer")! > events.firstIndex(of: "timer fired 3 times")!)")

    // RunLoop.main.run() with nothing but a timer that stops the program.
    Timer.scheduledTimer(withTimeInterval: 0.02, repeats: false) { _ in
        DispatchQueue.main.async {
            say("run loop: RunLoop.main.run() ran the main queue after the timer")
            exit(0)
        }
    }
    RunLoop.main.run()
}
