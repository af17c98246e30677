import XCTest
import Glibc
import CGrandCentral
@testable import GrandCentral

// The event thread's descriptor readiness: arming, rearm, unregister, stale generations.
// The probes (FireLog, Probe, recordReadiness, recordCompletion) are in EventLoopTests.swift.

extension EventLoopTests {
    // MARK: - Descriptors

    private func makePipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        for fd in fds { XCTAssertEqual(fcntl(fd, F_SETFL, O_NONBLOCK), 0) }
        return (fds[0], fds[1])
    }

    private func writeByte(_ fd: Int32) {
        var byte: UInt8 = 7
        XCTAssertEqual(write(fd, &byte, 1), 1)
    }

    private func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    func testReadReadinessIsReportedOncePerArm() {
        let log = FireLog()
        let loop = EventLoop.shared
        let (r, w) = makePipe()
        defer { close(r); close(w) }
        let context = Probe.context(log, 1)
        let token = loop.registerDescriptor(r, interest: .read, handler: recordReadiness, context: context)
        usleep(50_000)
        XCTAssertEqual(log.count, 0, "an empty pipe is not readable")

        writeByte(w)
        XCTAssertTrue(eventually { log.count == 1 })
        XCTAssertNotEqual(log.snapshot[0].events & GC_POLL_IN, 0)
        writeByte(w)
        usleep(50_000)
        XCTAssertEqual(log.count, 1, "disarmed until rearmed")

        loop.rearmDescriptor(token)
        XCTAssertTrue(eventually { log.count == 2 }, "still readable: level-triggered across rearms")

        drain(r)
        loop.rearmDescriptor(token)
        usleep(50_000)
        XCTAssertEqual(log.count, 2, "drained: nothing to report")
        writeByte(w)
        XCTAssertTrue(eventually { log.count == 3 })

        let done = FireLog()
        loop.unregisterDescriptor(token, completion: recordCompletion, context: Probe.context(done, -1))
        XCTAssertTrue(eventually { done.count == 1 })
        loop.rearmDescriptor(token)  // ignored after unregistration
        writeByte(w)
        usleep(50_000)
        XCTAssertEqual(log.count, 3, "no report after the unregistration completed")
        Probe.release(context)
    }

    func testReadAndWriteRegistrationsShareADescriptor() {
        var sockets: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &sockets), 0)
        defer { close(sockets[0]); close(sockets[1]) }
        let log = FireLog()
        let loop = EventLoop.shared
        let readContext = Probe.context(log, 1)
        let writeContext = Probe.context(log, 2)
        let reader = loop.registerDescriptor(sockets[0], interest: .read, handler: recordReadiness, context: readContext)
        let writer = loop.registerDescriptor(sockets[0], interest: .write, handler: recordReadiness, context: writeContext)
        XCTAssertTrue(eventually { log.count == 1 }, "a socket with buffer space is writable at once")
        XCTAssertEqual(log.snapshot[0].id, 2)
        XCTAssertNotEqual(log.snapshot[0].events & GC_POLL_OUT, 0)
        writeByte(sockets[1])
        XCTAssertTrue(eventually { log.count == 2 })
        XCTAssertEqual(log.snapshot[1].id, 1)
        XCTAssertNotEqual(log.snapshot[1].events & GC_POLL_IN, 0)

        let done = FireLog()
        loop.unregisterDescriptor(reader, completion: recordCompletion, context: Probe.context(done, 1))
        loop.rearmDescriptor(writer)
        XCTAssertTrue(eventually { log.count == 3 }, "the write registration survives the read one")
        XCTAssertEqual(log.snapshot[2].id, 2)
        loop.unregisterDescriptor(writer, completion: recordCompletion, context: Probe.context(done, 2))
        XCTAssertTrue(eventually { done.count == 2 })
        Probe.release(readContext)
        Probe.release(writeContext)
    }

    func testHangUpIsReported() {
        let log = FireLog()
        let (r, w) = makePipe()
        defer { close(r) }
        let context = Probe.context(log, 1)
        let token = EventLoop.shared.registerDescriptor(r, interest: .read, handler: recordReadiness, context: context)
        close(w)
        XCTAssertTrue(eventually { log.count == 1 })
        XCTAssertNotEqual(log.snapshot[0].events & GC_POLL_HUP, 0)
        let done = FireLog()
        EventLoop.shared.unregisterDescriptor(token, completion: recordCompletion, context: Probe.context(done, 0))
        XCTAssertTrue(eventually { done.count == 1 })
        Probe.release(context)
    }

    func testRegularFilesAreAlwaysReadyAndBadDescriptorsReportErrors() {
        let log = FireLog()
        let loop = EventLoop.shared
        let file = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(file) }
        let fileContext = Probe.context(log, 1)
        let fileToken = loop.registerDescriptor(file, interest: .read, handler: recordReadiness, context: fileContext)
        XCTAssertTrue(eventually { log.count == 1 }, "epoll cannot watch a regular file: always ready")
        XCTAssertEqual(log.snapshot[0].events, GC_POLL_IN)
        loop.rearmDescriptor(fileToken)
        XCTAssertTrue(eventually { log.count == 2 }, "and ready again after every rearm")

        let badContext = Probe.context(log, 2)
        let badToken = loop.registerDescriptor(1_000_000, interest: .read, handler: recordReadiness, context: badContext)
        XCTAssertTrue(eventually { log.count == 3 })
        XCTAssertEqual(log.snapshot[2].id, 2)
        XCTAssertEqual(log.snapshot[2].events, GC_POLL_ERR, "a bad descriptor is an error report, not a crash")

        let done = FireLog()
        loop.unregisterDescriptor(fileToken, completion: recordCompletion, context: Probe.context(done, 1))
        loop.unregisterDescriptor(badToken, completion: recordCompletion, context: Probe.context(done, 2))
        XCTAssertTrue(eventually { done.count == 2 })
        XCTAssertEqual(log.count, 3)
        Probe.release(fileContext)
        Probe.release(badContext)
    }

    func testGenerationsRetireWithTheirEntry() {
        // The table on its own: a reused descriptor number gets a new generation, and an
        // event carrying the old one finds no entry.
        var table = DescriptorTable()
        let first = DescriptorRegistration(descriptor: 7, interest: .read, handler: recordReadiness, context: nil)
        let firstEntry = table.add(first)
        XCTAssertNotEqual(firstEntry.generation, 0, "generation 0 is the loop's own descriptors")
        XCTAssertTrue(table.entry(descriptor: 7, generation: firstEntry.generation) === firstEntry)

        let sibling = DescriptorRegistration(descriptor: 7, interest: .write, handler: recordReadiness, context: nil)
        XCTAssertTrue(table.add(sibling) === firstEntry, "registrations on one descriptor share its entry")
        XCTAssertEqual(table.remove(first)?.isEmpty, false)
        XCTAssertEqual(table.remove(sibling)?.isEmpty, true)
        XCTAssertNil(table.remove(sibling), "removing twice finds nothing")
        XCTAssertEqual(table.count, 0)

        let second = DescriptorRegistration(descriptor: 7, interest: .read, handler: recordReadiness, context: nil)
        let secondEntry = table.add(second)
        XCTAssertNotEqual(secondEntry.generation, firstEntry.generation)
        XCTAssertNil(table.entry(descriptor: 7, generation: firstEntry.generation), "the stale event is dropped")
        XCTAssertTrue(table.entry(descriptor: 7, generation: secondEntry.generation) === secondEntry)
        XCTAssertNil(table.entry(descriptor: 8, generation: secondEntry.generation))
        XCTAssertEqual(EventLoop.generation(of: EventLoop.data(descriptor: 7, generation: secondEntry.generation)),
                       secondEntry.generation)
        XCTAssertEqual(EventLoop.descriptor(of: EventLoop.data(descriptor: 7, generation: secondEntry.generation)), 7)
    }

    func testReusedDescriptorNumberDoesNotInheritOldEvents() {
        // A readable pipe is registered, unregistered and closed in a hurry; a new, empty
        // pipe gets the same descriptor number and is registered. Whatever the kernel
        // reported for the old pipe must not reach the new registration.
        let loop = EventLoop.shared
        for round in 0..<50 {
            let old = FireLog()
            let fresh = FireLog()
            let (r1, w1) = makePipe()
            writeByte(w1)
            let oldContext = Probe.context(old, round)
            let oldToken = loop.registerDescriptor(r1, interest: .read, handler: recordReadiness, context: oldContext)
            let done = FireLog()
            loop.unregisterDescriptor(oldToken, completion: recordCompletion, context: Probe.context(done, round))
            close(r1)
            close(w1)
            let (r2, w2) = makePipe()
            let freshContext = Probe.context(fresh, round)
            let freshToken = loop.registerDescriptor(r2, interest: .read, handler: recordReadiness, context: freshContext)
            XCTAssertTrue(eventually { done.count == 1 })
            let oldReports = old.count
            XCTAssertTrue(eventLoopBarrier(loop))
            XCTAssertEqual(fresh.count, 0, "round \(round): the new, empty pipe was reported ready (descriptor \(r2))")
            XCTAssertEqual(old.count, oldReports, "no report after the unregistration completed")
            writeByte(w2)
            XCTAssertTrue(eventually { fresh.count == 1 })
            loop.unregisterDescriptor(freshToken, completion: recordCompletion, context: Probe.context(done, round))
            XCTAssertTrue(eventually { done.count == 2 })
            close(r2)
            close(w2)
            Probe.release(oldContext)
            Probe.release(freshContext)
        }
    }

    func testClosedWithoutUnregisteringDoesNotStealFromTheNewFile() {
        // The client closes a watched pipe without unregistering and opens another one under
        // the same number: the new file's readiness goes to the new registration only.
        let loop = EventLoop.shared
        for round in 0..<20 {
            let old = FireLog()
            let fresh = FireLog()
            let (r1, w1) = makePipe()
            let oldContext = Probe.context(old, round)
            let oldToken = loop.registerDescriptor(r1, interest: .read, handler: recordReadiness, context: oldContext)
            XCTAssertTrue(eventLoopBarrier(loop))  // the event thread registered it (a sleep raced at load 15)
            close(r1)
            close(w1)
            let (r2, w2) = makePipe()
            XCTAssertEqual(r2, r1, "the test needs the number reused")
            let freshContext = Probe.context(fresh, round)
            let freshToken = loop.registerDescriptor(r2, interest: .read, handler: recordReadiness, context: freshContext)
            writeByte(w2)
            XCTAssertTrue(eventually { fresh.count == 1 }, "round \(round): the new pipe was not reported")
            XCTAssertTrue(eventLoopBarrier(loop))
            XCTAssertEqual(old.count, 0, "round \(round): the closed pipe's registration saw the new file's event")
            let done = FireLog()
            loop.unregisterDescriptor(oldToken, completion: recordCompletion, context: Probe.context(done, 1))
            loop.unregisterDescriptor(freshToken, completion: recordCompletion, context: Probe.context(done, 2))
            XCTAssertTrue(eventually { done.count == 2 })
            // The old unregistration must not have taken the new file out of epoll: a fresh
            // registration on it still hears.
            let again = FireLog()
            let againContext = Probe.context(again, round)
            let againToken = loop.registerDescriptor(r2, interest: .read, handler: recordReadiness, context: againContext)
            XCTAssertTrue(eventually { again.count == 1 })
            loop.unregisterDescriptor(againToken, completion: recordCompletion, context: Probe.context(done, 3))
            XCTAssertTrue(eventually { done.count == 3 })
            close(r2)
            close(w2)
            Probe.release(oldContext)
            Probe.release(freshContext)
            Probe.release(againContext)
        }
    }
}
