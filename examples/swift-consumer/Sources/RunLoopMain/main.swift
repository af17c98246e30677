import Foundation
import GrandCentral

// A Foundation program whose main thread runs RunLoop.main: GrandCentral's main queue is
// drained there, on the main thread, in order, beside a Foundation timer.

/// Written only on the main thread.
final class Log: @unchecked Sendable { var order: [Int] = [] }
let log = Log()

let timer = Timer(timeInterval: 0.005, repeats: true) { _ in }
RunLoop.main.add(timer, forMode: .default)

DispatchQueue.global().async {
    for i in 0..<100 {
        DispatchQueue.main.async {
            precondition(Thread.isMainThread, "a main-queue item ran off the main thread")
            dispatchPrecondition(condition: .onQueue(.main))
            log.order.append(i)
            if i == 99 {
                precondition(log.order == Array(0..<100), "main queue order: \(log.order)")
                print("runloop-main: 100 items ran on the main thread in order under RunLoop.main.run()")
                exit(0)
            }
        }
    }
}
DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
    print("runloop-main: FAILED: the main queue did not drain within 30 s")
    exit(1)
}
RunLoop.main.run()
