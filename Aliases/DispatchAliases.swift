// Copy this file into your own module to use GrandCentral beside `import Foundation`.
//
// Foundation re-exports Swift's Dispatch, so a file that imports both Foundation and
// GrandCentral sees every Dispatch name twice (`DispatchQueue` is ambiguous). A module's own
// declarations shadow imported ones, so these aliases make the plain names mean
// GrandCentral's everywhere in the module that holds this file. Types reached through these
// (`DispatchQueue.Attributes`, `DispatchQoS.QoSClass`, …) and the time operators follow.
// scripts/api-diff.sh keeps this file in step with GrandCentral's public surface.

import GrandCentral

typealias DispatchData = GrandCentral.DispatchData
typealias DispatchDataIterator = GrandCentral.DispatchDataIterator
typealias DispatchGroup = GrandCentral.DispatchGroup
typealias DispatchIO = GrandCentral.DispatchIO
typealias DispatchObject = GrandCentral.DispatchObject
typealias DispatchPredicate = GrandCentral.DispatchPredicate
typealias DispatchQoS = GrandCentral.DispatchQoS
typealias DispatchQueue = GrandCentral.DispatchQueue
typealias DispatchSemaphore = GrandCentral.DispatchSemaphore
typealias DispatchSource = GrandCentral.DispatchSource
typealias DispatchSourceHandler = GrandCentral.DispatchSourceHandler
typealias DispatchSourceProtocol = GrandCentral.DispatchSourceProtocol
typealias DispatchSourceRead = GrandCentral.DispatchSourceRead
typealias DispatchSourceSignal = GrandCentral.DispatchSourceSignal
typealias DispatchSourceTimer = GrandCentral.DispatchSourceTimer
typealias DispatchSourceUserDataAdd = GrandCentral.DispatchSourceUserDataAdd
typealias DispatchSourceUserDataOr = GrandCentral.DispatchSourceUserDataOr
typealias DispatchSourceUserDataReplace = GrandCentral.DispatchSourceUserDataReplace
typealias DispatchSourceWrite = GrandCentral.DispatchSourceWrite
typealias DispatchSpecificKey = GrandCentral.DispatchSpecificKey
typealias DispatchTime = GrandCentral.DispatchTime
typealias DispatchTimeInterval = GrandCentral.DispatchTimeInterval
typealias DispatchTimeoutResult = GrandCentral.DispatchTimeoutResult
typealias DispatchWallTime = GrandCentral.DispatchWallTime
typealias DispatchWorkItem = GrandCentral.DispatchWorkItem
typealias DispatchWorkItemFlags = GrandCentral.DispatchWorkItemFlags

/// GrandCentral's `dispatchMain()`: parks the main thread and runs the main queue.
func dispatchMain() -> Never {
    GrandCentral.dispatchMain()
}

/// GrandCentral's `dispatchPrecondition(condition:file:line:)`.
func dispatchPrecondition(condition: @autoclosure () -> DispatchPredicate,
                          file: StaticString = #file, line: UInt = #line) {
    GrandCentral.dispatchPrecondition(condition: condition(), file: file, line: line)
}

/// The common call, `dispatchPrecondition(condition: .onQueue(.main))`: here `.main` could be
/// either module's main queue, and a function without defaulted arguments is the better match,
/// so this overload decides it for GrandCentral (the failure message names the queue's label).
/// With explicit `file:`/`line:` arguments, spell the queue out: `.onQueue(DispatchQueue.main)`.
func dispatchPrecondition(condition: @autoclosure () -> DispatchPredicate) {
    GrandCentral.dispatchPrecondition(condition: condition())
}
