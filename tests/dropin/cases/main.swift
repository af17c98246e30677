// The drop-in's Swift programs (scripts/check-dropin.sh): what Swift-on-Linux code does with
// Dispatch and Foundation, one case per argument (the async main is ../async, a program of
// its own, since a module has one entry point). Built once, the
// ordinary way (swiftc against the toolchain), and run twice: on the toolchain's
// libdispatch and through grandcentral-run. Each case prints only what is deterministic
// (orders that the APIs promise, counts, values), so the two runs must print the same.
import Dispatch
import Foundation

let cases: [String: () -> Void] = [
    "dispatch-main": dispatchMainCase,
    "run-loop": runLoopCase,
    "operation-queue": operationQueueCase,
    "process": processCase,
    "readability": readabilityCase,
    "sources": sourcesCase,
    "dispatch-io": dispatchIOCase,
    "notifications": notificationsCase,
    "url-session": urlSessionCase,
]

let arguments = CommandLine.arguments
guard arguments.count == 2, let run = cases[arguments[1]] else {
    FileHandle.standardError.write("usage: dropin-cases \(cases.keys.sorted().joined(separator: "|"))\n".data(using: .utf8)!)
    exit(64)
}
run()
