// DispatchData: the Swift API over the engine's data objects. Values equal plain arrays
// through every accessor (count, subscript, iteration, copyBytes, withUnsafeBytes,
// enumerateBytes, regions, region(location:)); append and subdata share regions; the tree
// stays balanced; deallocators run exactly once, when the last sharer goes, on their queue.
// The C API is tested by ctests/data.c.

import Glibc
@testable import GrandCentral
import XCTest

// Foundation re-exports Dispatch's DispatchData; DispatchAliases.swift makes the plain name GrandCentral's.

final class DataTests: XCTestCase {

    private func bytes(_ count: Int, seed: Int = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) &+ seed &* 7 &+ ($0 >> 8)) }
    }

    private func data(_ array: [UInt8]) -> DispatchData {
        array.withUnsafeBytes { DispatchData(bytes: $0) }
    }

    /// Every accessor agrees with `expected`.
    private func assertEqual(_ d: DispatchData, _ expected: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(d.count, expected.count, file: file, line: line)
        XCTAssertEqual(Array(d), expected, "iteration", file: file, line: line)
        XCTAssertEqual(d.startIndex, 0, file: file, line: line)
        XCTAssertEqual(d.endIndex, expected.count, file: file, line: line)
        for i in Swift.stride(from: 0, to: expected.count, by: Swift.max(1, expected.count / 17)) {
            XCTAssertEqual(d[i], expected[i], "subscript \(i)", file: file, line: line)
        }
        var copy = [UInt8](repeating: 0, count: expected.count)
        copy.withUnsafeMutableBytes { d.copyBytes(to: $0, count: expected.count) }
        XCTAssertEqual(copy, expected, "copyBytes(to:count:)", file: file, line: line)
        let mapped: [UInt8] = d.withUnsafeBytes { (p: UnsafePointer<UInt8>) in Array(UnsafeBufferPointer(start: p, count: expected.count)) }
        XCTAssertEqual(mapped, expected, "withUnsafeBytes", file: file, line: line)
        var enumerated = [UInt8]()
        d.enumerateBytes { buffer, index, _ in
            XCTAssertEqual(index, enumerated.count, file: file, line: line)
            enumerated.append(contentsOf: buffer)
        }
        XCTAssertEqual(enumerated, expected, "enumerateBytes", file: file, line: line)
        var fromRegions = [UInt8]()
        for region in d.regions {
            XCTAssertEqual(region.startIndex, fromRegions.count, file: file, line: line)
            fromRegions.append(contentsOf: region)
        }
        XCTAssertEqual(fromRegions, expected, "regions", file: file, line: line)
        XCTAssertTrue(d.reference.withObject { $0.isBalancedTree() }, "balanced", file: file, line: line)
    }

    func testEmpty() {
        assertEqual(DispatchData.empty, [])
        assertEqual(data([]), [])
        XCTAssertTrue(DispatchData.empty.isEmpty)
        var d = DispatchData.empty
        d.append(DispatchData.empty)
        assertEqual(d, [])
        XCTAssertEqual(DispatchData.empty.region(location: 0).offset, 0)
        XCTAssertEqual(DispatchData.empty.subdata(in: 0..<0).count, 0)
    }

    func testInitCopiesTheBytes() {
        var source = bytes(100)
        let d = data(source)
        source[0] = source[0] &+ 1
        XCTAssertEqual(d[0], bytes(100)[0])
        assertEqual(d, bytes(100))
    }

    func testAppendOverloadsAndManyPieces() {
        var d = DispatchData.empty
        var expected = [UInt8]()
        for i in 0..<300 {
            let piece = bytes(i % 13, seed: i)
            switch i % 3 {
            case 0: piece.withUnsafeBytes { d.append($0) }
            case 1: d.append(data(piece))
            default: piece.withUnsafeBufferPointer { d.append($0) }
            }
            expected += piece
        }
        assertEqual(d, expected)
        // Empty pieces vanish; the rest are regions of their own.
        XCTAssertEqual(d.regions.count, (0..<300).filter { $0 % 13 != 0 }.count)
    }

    func testSubdataSharesAndComposes() {
        var d = DispatchData.empty
        var expected = [UInt8]()
        for i in 0..<40 {
            let piece = bytes(17, seed: i)
            d.append(data(piece))
            expected += piece
        }
        for lower in Swift.stride(from: 0, through: expected.count, by: 11) {
            for upper in Swift.stride(from: lower, through: expected.count, by: 23) {
                let sub = d.subdata(in: lower..<upper)
                assertEqual(sub, Array(expected[lower..<upper]))
                if upper - lower > 4 {
                    let inner = sub.subdata(in: 2..<(upper - lower - 2))
                    assertEqual(inner, Array(expected[(lower + 2)..<(upper - 2)]))
                }
            }
        }
        // Subdata shares regions: the pointers are the original's.
        let original = d.regions.map { $0.withUnsafeBytes { $0.baseAddress! } }
        let shared = d.subdata(in: 17..<34).regions.map { $0.withUnsafeBytes { $0.baseAddress! } }
        XCTAssertEqual(shared, [original[1]])
    }

    func testRegionLocation() {
        var d = DispatchData.empty
        for i in 0..<10 { d.append(data(bytes(10, seed: i))) }
        for location in 0..<100 {
            let (region, offset) = d.region(location: location)
            XCTAssertEqual(offset, location / 10 * 10)
            XCTAssertEqual(region.count, 10)
            XCTAssertEqual(Array(region), bytes(10, seed: location / 10))
        }
        let past = d.region(location: 100)
        XCTAssertEqual(past.data.count, 0)
        XCTAssertEqual(past.offset, 100)
    }

    func testCopyBytesRanges() {
        var d = DispatchData.empty
        var expected = [UInt8]()
        for i in 0..<8 { let p = bytes(9, seed: i); d.append(data(p)); expected += p }
        var out = [UInt8](repeating: 0, count: 20)
        out.withUnsafeMutableBytes { d.copyBytes(to: $0, from: 5..<25) }
        XCTAssertEqual(out, Array(expected[5..<25]))
        var small = [UInt16](repeating: 0, count: 3)
        let copied = small.withUnsafeMutableBufferPointer { d.copyBytes(to: $0, from: 10..<72) }
        XCTAssertEqual(copied, 6)
        XCTAssertEqual(small.withUnsafeBytes { Array($0) }, Array(expected[10..<16]))
        var all = [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(all.withUnsafeMutableBufferPointer { d.copyBytes(to: $0) }, 72)
        XCTAssertEqual(Array(all[0..<72]), expected)
        XCTAssertEqual(Array(d[3..<7]), Array(expected[3..<7]))
    }

    func testLongAppendStaysBalanced() {
        var d = DispatchData.empty
        let piece = bytes(64)
        for _ in 0..<20_000 { d.append(data(piece)) }
        XCTAssertEqual(d.count, 64 * 20_000)
        let height = d.reference.withObject { $0.height }
        XCTAssertLessThanOrEqual(height, 22)   // 1.44 * log2(20,000) ≈ 20.6
        XCTAssertTrue(d.reference.withObject { $0.isBalancedTree() })
        var regions = 0
        d.enumerateBytes { buffer, index, _ in
            XCTAssertEqual(index, regions * 64)
            XCTAssertTrue(buffer.elementsEqual(piece))
            regions += 1
        }
        XCTAssertEqual(regions, 20_000)
        XCTAssertTrue(d.withUnsafeBytes { (p: UnsafePointer<UInt8>) in
            UnsafeBufferPointer(start: p + 64 * 19_999, count: 64).elementsEqual(piece)
        })
    }

    func testDeallocatorRunsOnceWhenTheLastSharerGoes() {
        let queue = DispatchQueue(label: "com.grandcentral.tests.data-deallocator")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let ran = expectation(description: "deallocator")
        let count = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        count.initialize(to: 0)
        let raw = UnsafeMutableRawPointer.allocate(byteCount: 32, alignment: 1)
        raw.initializeMemory(as: UInt8.self, repeating: 5, count: 32)
        var sub: DispatchData?
        do {
            let d = DispatchData(bytesNoCopy: UnsafeRawBufferPointer(start: raw, count: 32),
                                 deallocator: .custom(queue, {
                                     XCTAssertEqual(DispatchQueue.getSpecific(key: key), 7)
                                     count.pointee += 1
                                     raw.deallocate()
                                     ran.fulfill()
                                 }))
            var joined = d
            joined.append(data(bytes(3)))
            sub = joined.subdata(in: 30..<33)
        }
        queue.sync {}
        XCTAssertEqual(count.pointee, 0, "ran while a subdata still shared the region")
        XCTAssertEqual(Array(sub!), [5, 5] + bytes(3)[0..<1])
        sub = nil
        wait(for: [ran], timeout: 10)
        queue.sync {}
        XCTAssertEqual(count.pointee, 1)
        count.deallocate()
    }

    func testFreeDeallocator() {
        let raw = malloc(16)!
        memset(raw, 9, 16)
        let d = DispatchData(bytesNoCopy: UnsafeRawBufferPointer(start: raw, count: 16), deallocator: .free)
        XCTAssertEqual(Array(d), [UInt8](repeating: 9, count: 16))
    }

    func testConcurrentSharing() {
        var base = DispatchData.empty
        var expected = [UInt8]()
        for i in 0..<64 { let p = bytes(8, seed: i); base.append(data(p)); expected += p }
        let shared = base
        let want = expected
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<300 {
                let lower = (worker * 37 + round) % want.count
                let upper = Swift.min(want.count, lower + 1 + round % 90)
                var local = shared.subdata(in: lower..<upper)
                local.append(shared.subdata(in: 0..<8))
                let flat: [UInt8] = local.withUnsafeBytes { (p: UnsafePointer<UInt8>) in
                    Array(UnsafeBufferPointer(start: p, count: local.count))
                }
                if flat != Array(want[lower..<upper]) + want[0..<8] { XCTFail("worker \(worker) round \(round)") }
            }
        }
        // Mapping twice reuses the one flattening.
        let first = shared.withUnsafeBytes { (p: UnsafePointer<UInt8>) in UnsafeRawPointer(p) }
        let second = shared.withUnsafeBytes { (p: UnsafePointer<UInt8>) in UnsafeRawPointer(p) }
        XCTAssertEqual(first, second)
    }

    /// Random appends (both ways round) and subdata, checked against arrays and for balance
    /// (runs, prepends into the first run, cuts through runs).
    func testRandomOperationsStayBalancedAndEqual() {
        var state: UInt64 = 0x5EED
        func random(_ n: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return n == 0 ? 0 : Int((state >> 33) % UInt64(n))
        }
        var slots = [(DispatchData, [UInt8])](repeating: (.empty, []), count: 8)
        for step in 0..<4000 {
            let a = slots[random(8)], b = slots[random(8)]
            let result: (DispatchData, [UInt8])
            switch random(4) {
            case 0:
                let piece = bytes(random(20), seed: step)
                result = (data(piece), piece)
            case 1:
                var joined = a.0
                joined.append(b.0)
                result = (joined, a.1 + b.1)
            case 2:
                var joined = b.0
                joined.append(a.0)
                result = (joined, b.1 + a.1)
            default:
                let lower = random(a.1.count + 1), upper = lower + random(a.1.count - lower + 1)
                result = (a.0.subdata(in: lower..<upper), Array(a.1[lower..<upper]))
            }
            if result.1.count > 4000 { continue }
            slots[random(8)] = result
            XCTAssertTrue(result.0.reference.withObject { $0.isBalancedTree() }, "step \(step)")
            if step % 50 == 0 { assertEqual(result.0, result.1) }
            else { XCTAssertEqual(Array(result.0), result.1, "step \(step)") }
        }
    }
}
