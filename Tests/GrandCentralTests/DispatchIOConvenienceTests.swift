// DispatchIO.read(fromFileDescriptor:maxLength:runningHandlerOn:handler:) and
// DispatchIO.write(toFileDescriptor:data:runningHandlerOn:handler:), the Swift spellings of
// dispatch_read and dispatch_write: a read delivers what is available (a read loop on a
// pipe gets one delivery per chunk the writer wrote; maxLength bounds it; a file is read up
// to maxLength or end of file); calls on one descriptor run in call order (concurrent writes
// of consecutive chunks leave the file equal to the buffer, concurrent reads get
// consecutive ranges); the handler may close the descriptor; a bad descriptor is EBADF.
// The C spellings are tested by ctests/io_convenience.c.

import Glibc
@testable import GrandCentral
import XCTest

final class DispatchIOConvenienceTests: XCTestCase {
    private func pattern(_ count: Int, seed: Int = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 131 &+ (($0 &+ seed) >> 9)) }
    }

    private func temporaryPath() -> String {
        var template = Array("/tmp/gc-dispatchio-conv-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        Glibc.close(fd)
        return String(cString: template)
    }

    private func contents(of path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            result.append(contentsOf: buffer[0..<n])
        }
        return result
    }

    private func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        XCTAssertEqual(n, bytes.count)
    }

    /// Counters shared by a handler and the test thread.
    private final class Record: @unchecked Sendable {
        private let lock = Lock()
        private var _deliveries: [[UInt8]] = []
        private var _errors: [Int32] = []
        func add(_ data: [UInt8], _ error: Int32) { lock.withLock { _deliveries.append(data); _errors.append(error) } }
        var deliveries: [[UInt8]] { lock.withLock { _deliveries } }
        var errors: [Int32] { lock.withLock { _errors } }
    }

    func testReadLoopOnAPipeGetsOneDeliveryPerChunk() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let chunks = 10, chunk = 100
        let bytes = pattern(chunks * chunk)
        let record = Record()
        let finished = DispatchSemaphore(value: 0)
        let readerFD = fds[0]
        func readNext() {
            DispatchIO.read(fromFileDescriptor: readerFD, maxLength: Int.max, runningHandlerOn: .global()) { data, error in
                if error != 0 || data.count == 0 {
                    XCTAssertEqual(error, 0)
                    finished.signal()
                    return
                }
                record.add(Array(data), error)
                readNext()
            }
        }
        readNext()
        for i in 0..<chunks {
            usleep(20_000)
            writeAll(fds[1], bytes[(i * chunk)..<((i + 1) * chunk)])
            let giveUp = DispatchTime.now() + 10
            while record.deliveries.count <= i && DispatchTime.now() < giveUp { usleep(500) }
            XCTAssertEqual(record.deliveries.count, i + 1, "chunk \(i): a read waited for more than the pipe held")
            if record.deliveries.count != i + 1 { break }
        }
        Glibc.close(fds[1])
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(record.deliveries.map(\.count), Array(repeating: chunk, count: chunks))
        XCTAssertEqual(Array(record.deliveries.joined()), bytes)
        Glibc.close(fds[0])
    }

    func testMaxLengthBoundsAReadAndAFileReadsToIt() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let bytes = pattern(5000)
        writeAll(fds[1], bytes[0..<200])
        let record = Record()
        let done = DispatchSemaphore(value: 0)
        DispatchIO.read(fromFileDescriptor: fds[0], maxLength: 100, runningHandlerOn: .global()) { data, error in
            record.add(Array(data), error)
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(record.deliveries.first, Array(bytes[0..<100]))
        Glibc.close(fds[0])
        Glibc.close(fds[1])

        let path = temporaryPath()
        defer { unlink(path) }
        let fd = open(path, O_RDWR)
        writeAll(fd, bytes[...])
        XCTAssertEqual(lseek(fd, 0, SEEK_SET), 0)
        let fileRecord = Record()
        for length in [1000, Int.max] {
            DispatchIO.read(fromFileDescriptor: fd, maxLength: length, runningHandlerOn: .global()) { data, error in
                fileRecord.add(Array(data), error)
                done.signal()
            }
            XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        }
        XCTAssertEqual(fileRecord.errors, [0, 0])
        XCTAssertEqual(fileRecord.deliveries, [Array(bytes[0..<1000]), Array(bytes[1000...])])
        Glibc.close(fd)
    }

    func testConcurrentWritesOfConsecutiveChunksLeaveTheFileEqualToTheBuffer() {
        let chunks = 64, chunk = 1000, rounds = 60
        let bytes = pattern(chunks * chunk, seed: 7)
        let path = temporaryPath()
        defer { unlink(path) }
        var wrongRounds = 0
        for _ in 0..<rounds {
            let fd = open(path, O_WRONLY | O_TRUNC)
            let group = DispatchGroup()
            let record = Record()
            for i in 0..<chunks {
                group.enter()
                let data = bytes[(i * chunk)..<((i + 1) * chunk)].withUnsafeBytes { DispatchData(bytes: $0) }
                DispatchIO.write(toFileDescriptor: fd, data: data, runningHandlerOn: .global()) { rest, error in
                    record.add(rest.map { Array($0) } ?? [], error)
                    group.leave()
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
            XCTAssertEqual(record.errors, Array(repeating: 0, count: chunks))
            XCTAssertTrue(record.deliveries.allSatisfy { $0.isEmpty }, "every write went out whole")
            Glibc.close(fd)
            if contents(of: path) != bytes { wrongRounds += 1 }
        }
        XCTAssertEqual(wrongRounds, 0, "rounds whose file differs from the buffer")
    }

    func testConcurrentReadsOnAFileGetConsecutiveRanges() {
        let reads = 64, size = 1000, rounds = 20
        let bytes = pattern(reads * size, seed: 3)
        let path = temporaryPath()
        defer { unlink(path) }
        let wfd = open(path, O_WRONLY)
        writeAll(wfd, bytes[...])
        Glibc.close(wfd)
        var wrongReads = 0
        for _ in 0..<rounds {
            let fd = open(path, O_RDONLY)
            let group = DispatchGroup()
            let results = (0..<reads).map { _ in Record() }
            for i in 0..<reads {
                group.enter()
                DispatchIO.read(fromFileDescriptor: fd, maxLength: size, runningHandlerOn: .global()) { data, error in
                    results[i].add(Array(data), error)
                    group.leave()
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
            for i in 0..<reads where results[i].deliveries.first != Array(bytes[(i * size)..<((i + 1) * size)]) {
                wrongReads += 1
            }
            Glibc.close(fd)
        }
        XCTAssertEqual(wrongReads, 0, "reads (of \(reads * rounds)) that got another range than their call order's")
    }

    func testTheHandlerMayCloseTheDescriptor() {
        let path = temporaryPath()
        defer { unlink(path) }
        let bytes = pattern(4096 + 100, seed: 5)
        for round in 0..<100 {
            let fd = open(path, O_WRONLY | O_TRUNC)
            let done = DispatchSemaphore(value: 0)
            let data = bytes[round..<(round + 4096)].withUnsafeBytes { DispatchData(bytes: $0) }
            DispatchIO.write(toFileDescriptor: fd, data: data, runningHandlerOn: .global()) { rest, error in
                XCTAssertEqual(error, 0)
                XCTAssertNil(rest)
                XCTAssertEqual(Glibc.close(fd), 0)
                done.signal()
            }
            XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
            XCTAssertEqual(contents(of: path), Array(bytes[round..<(round + 4096)]), "round \(round)")
        }
    }

    func testABadDescriptorIsEBADF() {
        let fd = open("/dev/null", O_RDONLY)
        Glibc.close(fd)
        let done = DispatchSemaphore(value: 0)
        let record = Record()
        DispatchIO.read(fromFileDescriptor: fd, maxLength: 10, runningHandlerOn: .global()) { data, error in
            record.add(Array(data), error)
            done.signal()
        }
        DispatchIO.write(toFileDescriptor: fd, data: DispatchData.empty, runningHandlerOn: .global()) { _, error in
            record.add([], error)
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(record.errors, [EBADF, EBADF])
    }
}
