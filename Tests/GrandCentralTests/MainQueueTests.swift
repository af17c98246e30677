// The main queue in a process where someone else owns the main thread. XCTest links Foundation,
// so the toolchain's libdispatch is loaded here, and XCTest runs the tests on the main thread:
// GrandCentral's main queue must run whenever that thread's run loop turns (it is handed to
// libdispatch's main queue, which the run loop drains), on the main thread, in order; and
// likewise while an async test on the main actor suspends (the Swift runtime's executor
// turns the thread). dispatchMain() itself never returns; the example programs (examples/swift-consumer:
// DispatchMainTool, AsyncMain, RunLoopMain) cover it and the other owners of the main thread.

import Dispatch
import Foundation
import GrandCentral
import Glibc
import XCTest

final class MainQueueTests: XCTestCase {
    /// Turns the main thread's run loop until `flag` opens; false if `patience` ran out.
    private func runMainRunLoop(until flag: Flag) -> Bool {
        let deadline = Date(timeIntervalSinceNow: patience)
        while !flag.isOpen && Date() < deadline {
            _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.01))
        }
        return flag.isOpen
    }

    private func requireMainThread() throws {
        guard kernelThreadID() == getpid() else { throw XCTSkip("XCTest is not running this test on the main thread") }
    }

    /// What main-queue items saw: their order, whether they ran on the main thread, and
    /// `check`'s answer in each; `done` opens after the last.
    private struct MainQueueRun {
        let order = Recorder<Int>()
        let onMainThread = Recorder<Bool>()
        let checked = Recorder<Bool>()
        let done = Flag()
    }

    /// Submits 200 items to the main queue from a worker thread.
    private func submitToMainQueue(check: @escaping @Sendable () -> Bool = { true }) -> MainQueueRun {
        let run = MainQueueRun()
        DispatchQueue.global().async {
            for i in 0..<200 {
                DispatchQueue.main.async {
                    dispatchPrecondition(condition: .onQueue(.main))
                    run.onMainThread.append(kernelThreadID() == getpid())
                    run.checked.append(check())
                    run.order.append(i)
                    if i == 199 { run.done.open() }
                }
            }
        }
        return run
    }

    func testMainQueueItemsRunOnTheMainThreadInOrderWhenTheRunLoopTurns() throws {
        try requireMainThread()
        let run = submitToMainQueue()
        XCTAssertTrue(runMainRunLoop(until: run.done), "the main queue did not run while the run loop turned")
        XCTAssertEqual(run.order.values, Array(0..<200))
        XCTAssertEqual(Set(run.onMainThread.values), [true])
    }

    /// Both main queues run on the one main thread: Dispatch's (Foundation's) and ours.
    /// (Order across the two is not promised: ours reaches libdispatch's as one drain.)
    func testDispatchsMainQueueAndOursBothRunWhileTheRunLoopTurns() throws {
        try requireMainThread()
        let ours = Recorder<Int>()
        let theirs = Recorder<Int>()
        let done = Flag()
        let producer = DispatchQueue(label: "test.main.producer")
        producer.async {
            for i in 0..<20 {
                DispatchQueue.main.async { ours.append(i) }
                Dispatch.DispatchQueue.main.async { theirs.append(i) }
            }
            DispatchQueue.main.async {
                Dispatch.DispatchQueue.main.async { done.open() }
            }
        }
        XCTAssertTrue(runMainRunLoop(until: done))
        XCTAssertEqual(ours.values, Array(0..<20))
        XCTAssertEqual(theirs.values, Array(0..<20))
    }

    func testMainSyncFromAWorkerRunsOnTheMainThread() throws {
        try requireMainThread()
        let done = Flag()
        let ranOnMain = Flag()
        DispatchQueue.global().async {
            let value = DispatchQueue.main.sync { () -> Int in
                if kernelThreadID() == getpid() { ranOnMain.open() }
                return 42
            }
            if value == 42 { done.open() }
        }
        XCTAssertTrue(runMainRunLoop(until: done))
        XCTAssertTrue(ranOnMain.isOpen)
    }

    func testWorkItemOnTheMainQueueRunsAndNotifies() throws {
        try requireMainThread()
        let done = Flag()
        let item = DispatchWorkItem { dispatchPrecondition(condition: .onQueue(.main)) }
        item.notify(queue: .main) { done.open() }
        DispatchQueue.main.async(execute: item)
        XCTAssertTrue(runMainRunLoop(until: done))
    }

    /// The main thread belongs to the Swift runtime's main actor here (an async test on the
    /// main actor waits by suspending, not by turning a run loop of ours): GrandCentral's
    /// main queue still runs, on the main thread, in order, between main-actor jobs.
    @MainActor
    func testMainQueueRunsWhileAMainActorTaskAwaits() async throws {
        try requireMainThread()
        let run = submitToMainQueue(check: { MainActor.assumeIsolated { true } })
        // Wait by suspending the main actor (sleeping in a task), so only the Swift
        // runtime's executor turns the main thread.
        let deadline = monotonicNanoseconds() + UInt64(patience * 1e9)
        while !run.done.isOpen && monotonicNanoseconds() < deadline {
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        XCTAssertTrue(run.done.isOpen, "the main queue did not run while the main actor awaited")
        XCTAssertEqual(run.order.values, Array(0..<200))
        XCTAssertEqual(Set(run.onMainThread.values), [true])
        XCTAssertEqual(Set(run.checked.values), [true], "main-queue items run isolated to the main actor")
    }

    func testPreconditionOnMainHoldsOnTheMainThreadInsideSyncsAndWithFileAndLine() throws {
        try requireMainThread()
        let outer = DispatchQueue(label: "test.main.outer")
        let inner = DispatchQueue(label: "test.main.inner", attributes: .concurrent)
        outer.sync {
            dispatchPrecondition(condition: .onQueue(DispatchQueue.main), file: #file, line: #line)
            inner.sync(flags: .barrier) {
                dispatchPrecondition(condition: .onQueue(.main))
                dispatchPrecondition(condition: .onQueue(outer), file: #file, line: #line)
                dispatchPrecondition(condition: .onQueueAsBarrier(inner))
            }
        }
    }
}

/// The parts of the surface Dispatch has and GrandCentral lacked before issue 7.
final class DispatchCompatibilityTests: XCTestCase {
    func testGlobalPriorityQueuesAreTheQoSQueues() {
        XCTAssertTrue(DispatchQueue.global(priority: .high) === DispatchQueue.global(qos: .userInitiated))
        XCTAssertTrue(DispatchQueue.global(priority: .default) === DispatchQueue.global(qos: .default))
        XCTAssertTrue(DispatchQueue.global(priority: .low) === DispatchQueue.global(qos: .utility))
        XCTAssertTrue(DispatchQueue.global(priority: .background) === DispatchQueue.global(qos: .background))
    }

    /// Not Sendable. Swift 6 mode compiles this file: Dispatch accepts these closures without
    /// @Sendable, so GrandCentral must too.
    private final class Tally { var count = 0 }

    func testClosuresWithoutSendableAreAcceptedWhereDispatchAcceptsThem() {
        let tally = Tally()
        let queue = DispatchQueue(label: "test.compat.plain")
        let finished = Flag()
        let item = DispatchWorkItem { tally.count += 1 }
        item.notify(queue: queue) { tally.count += 10 }
        queue.async(execute: item)
        let group = DispatchGroup()
        queue.async(group: group, execute: DispatchWorkItem { tally.count += 100 })
        group.notify(queue: queue) { tally.count += 1000; finished.open() }
        XCTAssertTrue(finished.wait())
        XCTAssertEqual(queue.sync { tally.count }, 1111)
    }

    func testSyncWithoutAResult() {
        let queue = DispatchQueue(label: "test.compat.sync")
        let ran = Flag()
        let body: () -> Void = { ran.open() }
        queue.sync(execute: body)
        XCTAssertTrue(ran.isOpen)
    }

    func testQoSEquality() {
        XCTAssertTrue(DispatchQoS.utility == DispatchQoS(qosClass: .utility, relativePriority: 0))
        XCTAssertFalse(DispatchQoS.utility == DispatchQoS(qosClass: .utility, relativePriority: -1))
    }
}
