import Glibc
import GrandCentral

// A command-line tool that hands the main thread to dispatchMain(), as Dispatch tools do:
// work arrives on the main queue from other queues, runs there in order, and the last item
// ends the process.

/// Written only by items on the main queue.
final class Log: @unchecked Sendable { var order: [Int] = [] }
let log = Log()

let producer = DispatchQueue(label: "com.example.producer")
producer.asyncAfter(deadline: .now() + .milliseconds(20)) {
    for i in 0..<100 {
        DispatchQueue.main.async {
            dispatchPrecondition(condition: .onQueue(.main))
            dispatchPrecondition(condition: .notOnQueue(producer))
            log.order.append(i)
            if i == 99 {
                precondition(log.order == Array(0..<100), "main queue order: \(log.order)")
                print("dispatch-main: 100 items ran on the main queue in order under dispatchMain()")
                exit(0)
            }
        }
    }
}
DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
    print("dispatch-main: FAILED: the main queue did not drain within 30 s")
    exit(1)
}
dispatchMain()
