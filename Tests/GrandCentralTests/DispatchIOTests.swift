// DispatchIO: the Swift API over channels, spelled as Swift's Dispatch spells it. A file
// read whole through random and stream channels, a write then read through a path channel,
// the pipe conveniences, .stop giving ECANCELED, ENOENT through the handler, and the
// cleanup handler running once. The C API is tested by ctests/io.c.

import Glibc
@testable import GrandCentral
import XCTest

final class DispatchIOTests: XCTestCase {
    private func temporaryFile(_ bytes: [UInt8]) -> String {
        var template = Array("/tmp/gc-dispatchio-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        Glibc.close(fd)
        return String(cString: template)
    }

    private func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ ($0 >> 9)) }
    }

    func testReadWholeFileThroughRandomAndStreamChannels() {
        let bytes = pattern(1_000_003)
        let path = temporaryFile(bytes)
        defer { unlink(path) }
        for type in [DispatchIO.StreamType.random, .stream] {
            let fd = open(path, O_RDONLY)
            let cleaned = DispatchSemaphore(value: 0)
            var cleanups = 0
            let io = DispatchIO(type: type, fileDescriptor: fd, queue: .global()) { error in
                XCTAssertEqual(error, 0)
                cleanups += 1
                cleaned.signal()
            }
            io.setLimit(highWater: 64 * 1024)
            XCTAssertEqual(io.fileDescriptor, fd)
            let done = DispatchSemaphore(value: 0)
            var received = [UInt8]()
            let queue = DispatchQueue(label: "reader")
            io.read(offset: 0, length: Int.max, queue: queue) { isDone, data, error in
                XCTAssertEqual(error, 0)
                if let data {
                    XCTAssertLessThanOrEqual(data.count, 64 * 1024)
                    received.append(contentsOf: data)
                }
                if isDone { done.signal() }
            }
            XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
            XCTAssertEqual(received, bytes)
            io.close()
            XCTAssertEqual(cleaned.wait(timeout: .now() + 10), .success)
            XCTAssertEqual(cleanups, 1)
            Glibc.close(fd)
        }
    }

    func testChannelFromAClosedChannelIsCancelled() {
        // As libdispatch: a channel made from a closed one fails with ECANCELED, for its
        // operations and its cleanup handler (GrandCentral gave EBADF).
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { Glibc.close(fds[0]); Glibc.close(fds[1]) }
        let sourceCleaned = DispatchSemaphore(value: 0)
        let source = DispatchIO(type: .stream, fileDescriptor: fds[0], queue: .global()) { error in
            XCTAssertEqual(error, 0)
            sourceCleaned.signal()
        }
        source.close()
        let cleaned = DispatchSemaphore(value: 0)
        var cleanupError: Int32 = -1
        let io = DispatchIO(type: .stream, io: source, queue: .global()) { error in
            cleanupError = error
            cleaned.signal()
        }
        let read = DispatchSemaphore(value: 0)
        var readError: Int32 = -1
        io.read(offset: 0, length: 4, queue: .global()) { done, _, error in
            if done { readError = error; read.signal() }
        }
        XCTAssertEqual(read.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(readError, ECANCELED)
        io.close()
        XCTAssertEqual(cleaned.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(cleanupError, ECANCELED)
        XCTAssertEqual(sourceCleaned.wait(timeout: .now() + 10), .success)
    }

    func testPathChannelWritesThenReads() {
        let path = temporaryFile([])
        defer { unlink(path) }
        let cleaned = DispatchSemaphore(value: 0)
        guard let io = DispatchIO(type: .random, path: path, oflag: O_RDWR, mode: 0, queue: .global(),
                                  cleanupHandler: { _ in cleaned.signal() }) else { return XCTFail("nil channel") }
        let bytes = pattern(5000)
        let wrote = DispatchSemaphore(value: 0)
        io.write(offset: 0, data: bytes.withUnsafeBytes { DispatchData(bytes: $0) }, queue: .global()) { done, rest, error in
            XCTAssertEqual(error, 0)
            if done { XCTAssertNil(rest); wrote.signal() }
        }
        var barrierRan = false
        io.barrier { barrierRan = true }
        let read = DispatchSemaphore(value: 0)
        var received = [UInt8]()
        io.read(offset: 0, length: Int.max, queue: DispatchQueue(label: "r")) { done, data, _ in
            if let data { received.append(contentsOf: data) }
            if done { read.signal() }
        }
        XCTAssertEqual(wrote.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(read.wait(timeout: .now() + 10), .success)
        XCTAssertTrue(barrierRan)
        XCTAssertEqual(received, bytes)
        io.close(flags: .stop)
        XCTAssertEqual(cleaned.wait(timeout: .now() + 10), .success)
    }

    func testMissingPathReportsENOENT() {
        let io = DispatchIO(type: .stream, path: "/tmp/gc-no-such-dir/none", oflag: O_RDONLY, mode: 0,
                            queue: .global(), cleanupHandler: { _ in })!
        let done = DispatchSemaphore(value: 0)
        var reported: Int32 = 0
        io.read(offset: 0, length: 10, queue: .global()) { isDone, _, error in
            if isDone { reported = error; done.signal() }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(reported, ENOENT)
        io.close()
    }

    func testStopCancelsWithECANCELED() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let cleaned = DispatchSemaphore(value: 0)
        let io = DispatchIO(type: .stream, fileDescriptor: fds[0], queue: .global()) { _ in cleaned.signal() }
        let done = DispatchSemaphore(value: 0)
        var reported: Int32 = 0
        io.read(offset: 0, length: 10, queue: .global()) { isDone, _, error in
            if isDone { reported = error; done.signal() }
        }
        usleep(20_000)
        io.close(flags: .stop)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(reported, ECANCELED)
        XCTAssertEqual(cleaned.wait(timeout: .now() + 10), .success)
        Glibc.close(fds[0])
        Glibc.close(fds[1])
    }

    func testConveniencesOverAPipe() {
        // More than a pipe holds: the write waits for the reader, and each read delivers
        // what the pipe holds, so the reader loops until it has everything.
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let bytes = pattern(200_000)
        let done = DispatchGroup()
        done.enter()
        done.enter()
        let readerFD = fds[0]
        var received = [UInt8]()
        func readMore() {
            DispatchIO.read(fromFileDescriptor: readerFD, maxLength: bytes.count - received.count,
                            runningHandlerOn: .global()) { data, error in
                XCTAssertEqual(error, 0)
                received.append(contentsOf: data)
                if data.count == 0 || received.count >= bytes.count { done.leave() } else { readMore() }
            }
        }
        readMore()
        DispatchIO.write(toFileDescriptor: fds[1], data: bytes.withUnsafeBytes { DispatchData(bytes: $0) },
                         runningHandlerOn: .global()) { rest, error in
            XCTAssertEqual(error, 0)
            XCTAssertNil(rest)
            done.leave()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(received, bytes)
        Glibc.close(fds[0])
        Glibc.close(fds[1])
    }
}
