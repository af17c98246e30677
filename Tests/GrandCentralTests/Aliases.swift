// XCTest imports Foundation, and Foundation re-exports the toolchain's Dispatch, so every test
// file sees two DispatchQueue types: Dispatch's and GrandCentral's. Declarations in this
// module shadow imported ones, so these aliases make the plain names mean GrandCentral's
// everywhere in the test target, and the test files read exactly like code using Dispatch.
// (In the reference run against Apple's Dispatch, a shim module named GrandCentral re-exports
// Dispatch, and the same aliases resolve to Dispatch's types.)

import GrandCentral

typealias DispatchQueue = GrandCentral.DispatchQueue
typealias DispatchGroup = GrandCentral.DispatchGroup
typealias DispatchSemaphore = GrandCentral.DispatchSemaphore
typealias DispatchWorkItem = GrandCentral.DispatchWorkItem
typealias DispatchWorkItemFlags = GrandCentral.DispatchWorkItemFlags
typealias DispatchQoS = GrandCentral.DispatchQoS
typealias DispatchSpecificKey = GrandCentral.DispatchSpecificKey
typealias DispatchTime = GrandCentral.DispatchTime
typealias DispatchTimeInterval = GrandCentral.DispatchTimeInterval
typealias DispatchTimeoutResult = GrandCentral.DispatchTimeoutResult
typealias DispatchPredicate = GrandCentral.DispatchPredicate

/// Shadows Dispatch's free function of the same name.
func dispatchPrecondition(condition: @autoclosure () -> DispatchPredicate) {
    GrandCentral.dispatchPrecondition(condition: condition())
}
