// The Swift API of sources (DispatchSource.make…Source and the DispatchSource* protocols):
// timers (repeating, one-shot, never, re-scheduled, suspended), user data sources (add, or,
// replace), a read source on a pipe, the handlers' order (registration first, cancel once
// and last), work item handlers, and lifetimes (a dropped source stops and is freed; a
// handler that captures its own source is freed after cancel). Counts and order are exact;
// times only bound from below ("never early") or by `patience` (DESIGN.md, hard rule 7).

import Glibc
import GrandCentral
import Synchronization
import XCTest

/// Sets `flag` when it goes away: proves a handler closure that captured it was released.
private final class Sentinel: Sendable {
    let flag: Flag
    init(_ flag: Flag) { self.flag = flag }
    deinit { flag.open() }
}

/// A shared sum.
private final class Total: Sendable {
    private let storage = Atomic<UInt>(0)
    func add(_ value: UInt) { storage.wrappingAdd(value, ordering: .sequentiallyConsistent) }
    var value: UInt { storage.load(ordering: .sequentiallyConsistent) }
}

final class DispatchSourceTests: XCTestCase {

    // MARK: Timers

    func testRepeatingTimerCountsFiresAndData() {
        let queue = DispatchQueue(label: "test.source.timer.repeating")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval: UInt64 = 10_000_000
        let handlerRuns = Counter()
        let data = Recorder<UInt>()
        let firstDeadline = DispatchTime.now() + .milliseconds(10)
        let lateEnough = Recorder<Bool>()
        timer.setEventHandler {
            // Fires (counted in data) by now: never more than one per interval since the start.
            let now = DispatchTime.now().uptimeNanoseconds
            let fires = data.values.reduce(0, +) + timer.data
            lateEnough.append(now >= firstDeadline.uptimeNanoseconds + (UInt64(fires) - 1) * interval)
            data.append(timer.data)
            handlerRuns.increment()
        }
        let cancelled = Flag()
        timer.setCancelHandler { cancelled.open() }
        timer.schedule(deadline: firstDeadline, repeating: .milliseconds(10))
        timer.activate()
        XCTAssertTrue(eventually { data.values.reduce(0, +) >= 20 })
        timer.cancel()
        XCTAssertTrue(cancelled.wait())
        let values = data.values
        XCTAssertEqual(values.count, handlerRuns.value)
        XCTAssertTrue(values.allSatisfy { $0 >= 1 }, "a timer's data is the fires since the last handler: \(values)")
        XCTAssertEqual(lateEnough.values.filter { !$0 }.count, 0, "a repeating timer fired early")
        XCTAssertTrue(timer.isCancelled)
    }

    func testOneShotTimerFiresOnce() {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "test.source.timer.oneshot"))
        let data = Recorder<UInt>()
        let times = Recorder<UInt64>()
        let deadline = DispatchTime.now() + .milliseconds(20)
        timer.setEventHandler {
            times.append(DispatchTime.now().uptimeNanoseconds)
            data.append(timer.data)
        }
        timer.schedule(deadline: deadline)
        timer.activate()
        XCTAssertTrue(eventually { data.count == 1 })
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(data.values, [1])
        XCTAssertGreaterThanOrEqual(times.values[0], deadline.uptimeNanoseconds, "fired early")
        timer.cancel()
    }

    func testOneShotForms() {
        // repeating .infinity (seconds), a wall-clock deadline: each fires once.
        let queue = DispatchQueue(label: "test.source.timer.forms")
        let uptime = DispatchSource.makeTimerSource(queue: queue)
        let wall = DispatchSource.makeTimerSource(queue: queue)
        let uptimeFires = Counter()
        let wallFires = Counter()
        uptime.setEventHandler { uptimeFires.increment() }
        wall.setEventHandler { wallFires.increment() }
        uptime.schedule(deadline: .now() + .milliseconds(5), repeating: .infinity)
        wall.schedule(wallDeadline: .now() + .milliseconds(5))
        uptime.activate()
        wall.activate()
        XCTAssertTrue(eventually { uptimeFires.value == 1 && wallFires.value == 1 })
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(uptimeFires.value, 1)
        XCTAssertEqual(wallFires.value, 1)
        uptime.cancel()
        wall.cancel()
    }

    func testRepeatingInSecondsAndOnTheWallClock() {
        let queue = DispatchQueue(label: "test.source.timer.seconds")
        let seconds = DispatchSource.makeTimerSource(queue: queue)
        let wall = DispatchSource.makeTimerSource(queue: queue)
        let secondsFires = Counter()
        let wallFires = Counter()
        seconds.setEventHandler { secondsFires.increment() }
        wall.setEventHandler { wallFires.increment() }
        seconds.schedule(deadline: .now(), repeating: 0.005)
        wall.schedule(wallDeadline: .now(), repeating: .milliseconds(5), leeway: .milliseconds(1))
        seconds.activate()
        wall.activate()
        XCTAssertTrue(eventually { secondsFires.value >= 5 && wallFires.value >= 5 })
        seconds.cancel()
        wall.cancel()
    }

    func testDistantFutureNeverFires() {
        let queue = DispatchQueue(label: "test.source.timer.never")
        let once = DispatchSource.makeTimerSource(queue: queue)
        let repeating = DispatchSource.makeTimerSource(queue: queue)
        let fires = Counter()
        once.setEventHandler { fires.increment() }
        repeating.setEventHandler { fires.increment() }
        once.schedule(deadline: .distantFuture)
        repeating.schedule(deadline: .distantFuture, repeating: .milliseconds(1))
        once.activate()
        repeating.activate()
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(fires.value, 0)
        once.cancel()
        repeating.cancel()
    }

    func testNeverScheduledTimerNeverFires() {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "test.source.timer.unset"))
        let fires = Counter()
        timer.setEventHandler { fires.increment() }
        timer.activate()
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(fires.value, 0)
        timer.cancel()
    }

    func testReschedulingMovesTheTimer() {
        let queue = DispatchQueue(label: "test.source.timer.reschedule")
        // Earlier: from an hour away to 20 ms away.
        let earlier = DispatchSource.makeTimerSource(queue: queue)
        let earlierFires = Counter()
        earlier.setEventHandler { earlierFires.increment() }
        earlier.schedule(deadline: .now() + .seconds(3600))
        earlier.activate()
        earlier.schedule(deadline: .now() + .milliseconds(20))
        XCTAssertTrue(eventually { earlierFires.value == 1 })
        earlier.cancel()

        // Later: from 20 ms away to 300 ms away: the first deadline does not fire.
        let later = DispatchSource.makeTimerSource(queue: queue)
        let times = Recorder<UInt64>()
        later.setEventHandler { times.append(DispatchTime.now().uptimeNanoseconds) }
        later.schedule(deadline: .now() + .milliseconds(20))
        later.activate()
        let moved = DispatchTime.now() + .milliseconds(300)
        later.schedule(deadline: moved)
        XCTAssertTrue(eventually { times.count == 1 })
        XCTAssertGreaterThanOrEqual(times.values[0], moved.uptimeNanoseconds, "fired at the old deadline")
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(times.count, 1)

        // A repeating timer made one-shot.
        let repeating = DispatchSource.makeTimerSource(queue: queue)
        let repeatingFires = Counter()
        repeating.setEventHandler { repeatingFires.increment() }
        repeating.schedule(deadline: .now(), repeating: .milliseconds(2))
        repeating.activate()
        XCTAssertTrue(eventually { repeatingFires.value >= 3 })
        repeating.schedule(deadline: .distantFuture)
        sleep(milliseconds: 20)  // a fire already merged may still be delivered
        let settled = repeatingFires.value
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(repeatingFires.value, settled)
        later.cancel()
        repeating.cancel()
    }

    func testSuspendedTimerCoalescesIntoData() {
        let queue = DispatchQueue(label: "test.source.timer.suspend")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let data = Recorder<UInt>()
        timer.setEventHandler { data.append(timer.data) }
        timer.schedule(deadline: .now(), repeating: .milliseconds(5))
        timer.activate()
        XCTAssertTrue(eventually { data.count >= 1 })
        timer.suspend()
        sleep(milliseconds: 20)  // a handler that had started finishes
        let before = data.count
        sleep(milliseconds: 100)
        XCTAssertEqual(data.count, before, "a suspended timer's handler ran")
        timer.resume()
        XCTAssertTrue(eventually { data.count > before })
        let afterResume = data.values[before]
        XCTAssertGreaterThan(afterResume, 1, "fires while suspended coalesce into the data")
        timer.cancel()
    }

    func testTimerProperties() {
        let timer = DispatchSource.makeTimerSource(flags: .strict, queue: nil)
        XCTAssertEqual(timer.handle, 0)
        XCTAssertEqual(timer.mask, DispatchSource.TimerFlags.strict.rawValue)
        XCTAssertEqual(timer.data, 0)
        XCTAssertFalse(timer.isCancelled)
        timer.activate()
        timer.cancel()
        XCTAssertTrue(timer.isCancelled)
        XCTAssertEqual(DispatchSource.makeTimerSource().mask, 0)
    }

    // MARK: User data

    func testUserDataAddFromFourThreadsSumsExactly() {
        let source = DispatchSource.makeUserDataAddSource(queue: DispatchQueue(label: "test.source.add"))
        let sum = Total()
        let handlerRuns = Counter()
        let zeroData = Counter()
        source.setEventHandler {
            if source.data == 0 { zeroData.increment() }
            sum.add(source.data)
            handlerRuns.increment()
        }
        source.activate()
        let shared = Unprotected(source)
        let threads = (1 ... 4).map { value in
            TestThread { for _ in 0 ..< 25_000 { shared.value.add(data: UInt(value)) } }
        }
        threads.forEach { $0.join() }
        let expected: UInt = 25_000 * (1 + 2 + 3 + 4)
        XCTAssertTrue(eventually { sum.value >= expected })
        sleep(milliseconds: 50)
        XCTAssertEqual(sum.value, expected)
        XCTAssertEqual(zeroData.value, 0)
        XCTAssertLessThanOrEqual(handlerRuns.value, 100_000)
        source.cancel()
    }

    func testUserDataOrCoalescesBits() {
        let source = DispatchSource.makeUserDataOrSource(queue: DispatchQueue(label: "test.source.or"))
        let data = Recorder<UInt>()
        source.setEventHandler { data.append(source.data) }
        source.activate()
        source.or(data: 4)
        XCTAssertTrue(eventually { data.count == 1 })
        source.suspend()
        source.or(data: 1)
        source.or(data: 2)
        source.or(data: 8)
        source.or(data: 0)  // merges nothing
        source.resume()
        XCTAssertTrue(eventually { data.count == 2 })
        sleep(milliseconds: 50)
        XCTAssertEqual(data.values, [4, 11])
        source.cancel()
    }

    func testUserDataReplaceKeepsTheLastValue() {
        let source = DispatchSource.makeUserDataReplaceSource(queue: DispatchQueue(label: "test.source.replace"))
        let data = Recorder<UInt>()
        source.setEventHandler { data.append(source.data) }
        source.activate()
        source.replace(data: 3)
        XCTAssertTrue(eventually { data.count == 1 })
        source.suspend()
        source.replace(data: 5)
        source.replace(data: 9)
        source.replace(data: 7)
        source.resume()
        XCTAssertTrue(eventually { data.count == 2 })
        sleep(milliseconds: 50)
        XCTAssertEqual(data.values, [3, 7])

        // Zero is stored: it takes back the pending 5, and nothing is delivered (the
        // toolchain's libdispatch does the same with dispatch_source_merge_data(s, 0)).
        source.suspend()
        source.replace(data: 5)
        source.replace(data: 0)
        source.resume()
        sleep(milliseconds: 50)
        XCTAssertEqual(data.values, [3, 7])
        source.cancel()
    }

    // MARK: Descriptors

    func testReadSourceOnAPipeReportsTheByteCountAndStopsAfterCancel() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer {
            close(readEnd)
            close(writeEnd)
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: readEnd,
                                                   queue: DispatchQueue(label: "test.source.read"))
        XCTAssertEqual(source.handle, UInt(readEnd))
        let counts = Recorder<UInt>()
        let bytes = Recorder<UInt8>()
        source.setEventHandler {
            let available = Int(source.data)
            counts.append(source.data)
            var buffer = [UInt8](repeating: 0, count: max(available, 1))
            let got = read(readEnd, &buffer, available)
            if got > 0 { buffer[0 ..< got].forEach { bytes.append($0) } }
        }
        let cancelled = Counter()
        source.setCancelHandler { cancelled.increment() }
        source.activate()

        XCTAssertEqual(write(writeEnd, [1, 2, 3, 4, 5] as [UInt8], 5), 5)
        XCTAssertTrue(eventually { bytes.count == 5 })
        XCTAssertEqual(counts.values, [5])
        XCTAssertEqual(write(writeEnd, [6, 7, 8] as [UInt8], 3), 3)
        XCTAssertTrue(eventually { bytes.count == 8 })
        XCTAssertEqual(counts.values, [5, 3])
        XCTAssertEqual(bytes.values, [1, 2, 3, 4, 5, 6, 7, 8])

        source.cancel()
        XCTAssertTrue(eventually { cancelled.value == 1 })
        XCTAssertEqual(write(writeEnd, [9] as [UInt8], 1), 1)
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(counts.values, [5, 3], "a cancelled read source fired")
        XCTAssertEqual(cancelled.value, 1)
    }

    // MARK: Handlers

    func testCancelHandlerRunsOnceAfterTheLastEventHandler() {
        for iteration in 0 ..< 200 {
            let source = DispatchSource.makeUserDataAddSource(queue: .global())
            let log = Recorder<Int>()  // 1: event handler starts, 2: it returns, 3: cancel handler
            source.setEventHandler {
                log.append(1)
                spin(microseconds: 50)
                log.append(2)
            }
            source.setCancelHandler { log.append(3) }
            source.activate()
            let shared = Unprotected(source)
            let merger = TestThread { for _ in 0 ..< 200 { shared.value.add(data: 1) } }
            if iteration % 2 == 0 { spin(microseconds: 100) }
            source.cancel()
            merger.join()
            XCTAssertTrue(eventually { log.values.contains(3) })
            sleep(milliseconds: 2)
            let values = log.values
            XCTAssertEqual(values.filter { $0 == 3 }.count, 1, "iteration \(iteration): \(values)")
            XCTAssertEqual(values.last, 3, "iteration \(iteration): an event handler ran after the cancel handler")
            let events = values.dropLast()
            XCTAssertEqual(Array(events), Array(repeating: [1, 2], count: events.count / 2).flatMap { $0 },
                           "iteration \(iteration): event handlers overlapped")
            if values.last != 3 { break }
        }
    }

    func testRegistrationHandlerRunsBeforeTheFirstEvent() {
        // Data merged before activation is pending; activation runs the registration handler
        // first, then the event.
        let source = DispatchSource.makeUserDataAddSource(queue: DispatchQueue(label: "test.source.registration"))
        let log = Recorder<String>()
        source.setRegistrationHandler { log.append("registration") }
        source.setEventHandler { log.append("event \(source.data)") }
        source.add(data: 2)
        sleep(milliseconds: 20)
        XCTAssertEqual(log.values, [], "an inactive source ran a handler")
        source.activate()
        XCTAssertTrue(eventually { log.count == 2 })
        source.add(data: 3)
        XCTAssertTrue(eventually { log.count == 3 })
        XCTAssertEqual(log.values, ["registration", "event 2", "event 3"])

        // A timer due at once: registration still comes first, and runs once.
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "test.source.registration.timer"))
        let timerLog = Recorder<String>()
        timer.setRegistrationHandler { timerLog.append("registration") }
        timer.setEventHandler { timerLog.append("event") }
        timer.schedule(deadline: .now(), repeating: .milliseconds(1))
        timer.resume()  // resume activates an inactive source
        XCTAssertTrue(eventually { timerLog.count >= 4 })
        timer.cancel()
        XCTAssertEqual(timerLog.values.first, "registration")
        XCTAssertEqual(timerLog.values.filter { $0 == "registration" }.count, 1)
        source.cancel()
    }

    func testWorkItemHandlers() {
        let source = DispatchSource.makeUserDataAddSource(queue: DispatchQueue(label: "test.source.workitem"))
        let performed = Recorder<UInt>()
        let registered = Counter()
        let cancelled = Counter()
        let item = DispatchWorkItem { performed.append(source.data) }
        // Completion is observed with notify: an item that is waited on may not run again
        // (Dispatch traps on that too), and this one runs at every event.
        let completed = Flag()
        item.notify(queue: .global()) { completed.open() }
        source.setEventHandler(handler: item)
        source.setRegistrationHandler(handler: DispatchWorkItem { registered.increment() })
        let cancelItem = DispatchWorkItem { cancelled.increment() }
        source.setCancelHandler(handler: cancelItem)
        source.activate()
        source.add(data: 3)
        XCTAssertTrue(completed.wait(), "the item completes when first performed")
        source.add(data: 4)
        XCTAssertTrue(eventually { performed.count == 2 })
        XCTAssertEqual(performed.values, [3, 4], "the item is performed at each event")
        XCTAssertEqual(registered.value, 1)

        // A cancelled item's body is skipped.
        item.cancel()
        source.add(data: 5)
        sleep(milliseconds: 50)
        XCTAssertEqual(performed.values, [3, 4])

        source.cancel()
        XCTAssertEqual(cancelItem.wait(timeout: .now() + patience), .success)
        XCTAssertEqual(cancelled.value, 1)
    }

    func testClosureHandlerWithQoSAndFlagsRuns() {
        let source = DispatchSource.makeUserDataAddSource(queue: DispatchQueue(label: "test.source.qos"))
        let data = Recorder<UInt>()
        source.setEventHandler(qos: .userInitiated, flags: [.enforceQoS]) { data.append(source.data) }
        source.activate()
        source.add(data: 6)
        XCTAssertTrue(eventually { data.count == 1 })
        XCTAssertEqual(data.values, [6])
        // Replacing the handler with nil: events deliver nothing.
        source.setEventHandler(handler: nil)
        source.add(data: 1)
        sleep(milliseconds: 50)
        XCTAssertEqual(data.values, [6])
        source.cancel()
    }

    // MARK: Lifetimes

    func testDroppedSourceStopsFiringAndIsFreed() {
        let fires = Counter()
        let handlerReleased = Flag()
        weak var weakTimer: AnyObject?
        do {
            let sentinel = Sentinel(handlerReleased)
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "test.source.dropped"))
            timer.setEventHandler {
                _ = sentinel
                fires.increment()
            }
            timer.schedule(deadline: .now(), repeating: .milliseconds(2))
            timer.activate()
            weakTimer = timer as AnyObject
            XCTAssertTrue(eventually { fires.value >= 3 })
        }
        XCTAssertNil(weakTimer, "the dropped source is still alive")
        XCTAssertTrue(handlerReleased.wait(), "the dropped source's handler was never released")
        let settled = fires.value
        sleep(milliseconds: quietPeriodMilliseconds)
        XCTAssertEqual(fires.value, settled, "a dropped timer kept firing")
    }

    func testHandlerCapturingItsSourceIsReleasedAfterCancel() {
        weak var weakSource: AnyObject?
        let handlerReleased = Flag()
        let cancelled = Flag()
        do {
            let sentinel = Sentinel(handlerReleased)
            let source = DispatchSource.makeUserDataAddSource(queue: DispatchQueue(label: "test.source.cycle"))
            source.setEventHandler {
                _ = sentinel
                if source.data > 100 { source.cancel() }  // captures the source: a cycle until cancel
            }
            source.setCancelHandler {
                _ = source
                cancelled.open()
            }
            source.activate()
            source.add(data: 101)
            weakSource = source as AnyObject
        }
        XCTAssertTrue(cancelled.wait())
        XCTAssertTrue(handlerReleased.wait(), "the handlers were not released after cancel")
        XCTAssertTrue(eventually { weakSource == nil }, "a source captured by its own handlers leaked")
    }

    // MARK: Other kinds

    func testDescriptorSignalProcessAndFileSystemProperties() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let writeSource = DispatchSource.makeWriteSource(fileDescriptor: fds[1])
        XCTAssertEqual(writeSource.handle, UInt(fds[1]))
        XCTAssertEqual(writeSource.mask, 0)
        let signalSource = DispatchSource.makeSignalSource(signal: SIGUSR2)
        XCTAssertEqual(signalSource.handle, UInt(SIGUSR2))

        let process = DispatchSource.makeProcessSource(identifier: getpid(), eventMask: [.exit, .signal])
        XCTAssertEqual(process.handle, getpid())
        XCTAssertEqual(process.mask, [.exit, .signal])
        XCTAssertEqual(process.data, [])
        XCTAssertTrue(process is DispatchSource)

        let file = DispatchSource.makeFileSystemObjectSource(fileDescriptor: fds[0], eventMask: [.write, .delete])
        XCTAssertEqual(file.handle, fds[0])
        XCTAssertEqual(file.mask, [.write, .delete])
        XCTAssertEqual(file.mask.rawValue, 0x3)

        XCTAssertEqual(DispatchSource.ProcessEvent.all.rawValue, 0xE800_0000)
        XCTAssertEqual(DispatchSource.FileSystemEvent.all.rawValue, 0x7F)
        XCTAssertEqual(DispatchSource.FileSystemEvent.funlock.rawValue, 0x100)
        for source in [writeSource, signalSource, process, file] as [DispatchSourceProtocol] {
            source.activate()
            source.cancel()
            XCTAssertTrue(source.isCancelled)
        }
    }
}
