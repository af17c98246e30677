// Thread names (ThreadNames in the engine): a worker that runs one queue's work for more
// than a few milliseconds carries the queue's label, an idle one `gc.idle.<root>`, and the
// event thread is `gc.event`.

import Glibc
import GrandCentral
import Synchronization
import XCTest

final class ThreadNameTests: XCTestCase {
    /// tid → name of every thread of this process, from /proc/self/task/*/comm.
    private func threadNames() -> [Int32: String] {
        var names: [Int32: String] = [:]
        guard let dir = opendir("/proc/self/task") else { return names }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            guard let tid = Int32(name) else { continue }
            guard let file = fopen("/proc/self/task/\(tid)/comm", "r") else { continue }
            var buffer = [CChar](repeating: 0, count: 64)
            if fgets(&buffer, 64, file) != nil {
                var comm = String(cString: buffer)
                if comm.hasSuffix("\n") { comm.removeLast() }
                names[tid] = comm
            }
            fclose(file)
        }
        return names
    }

    private func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = monotonicNow() + UInt64(seconds * 1e9)
        while monotonicNow() < deadline {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    func testLongRunningWorkerCarriesItsQueueLabelThenAnIdleName() {
        let label = "com.example.thread-names.spinner"
        let prefix = String(label.prefix(15))
        let queue = DispatchQueue(label: label)
        let started = Atomic<Int32>(0)
        let looked = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
        queue.async {
            started.store(currentThreadID(), ordering: .releasing)
            // Spin (not sleep) on one queue: 60 ms, longer (up to 2 s) until the test has
            // looked, so a loaded machine that delays the monitor does not fail the test.
            let begin = monotonicNow()
            while true {
                let elapsed = monotonicNow() - begin
                if elapsed >= 2_000_000_000 || (elapsed >= 60_000_000 && looked.load(ordering: .relaxed)) { break }
            }
            finished.store(true, ordering: .releasing)
        }
        XCTAssertTrue(waitFor(seconds: 5) { started.load(ordering: .acquiring) != 0 }, "the block never started")
        let tid = started.load(ordering: .acquiring)
        // While it spins, the monitor renames it (a few ms). Generous: a loaded machine may
        // delay the monitor, so stop the spin only once seen (or after 60 ms of spinning).
        var seenName: String?
        _ = waitFor(seconds: 5) {
            seenName = threadNames()[tid]
            return seenName == prefix || finished.load(ordering: .acquiring)
        }
        looked.store(true, ordering: .relaxed)
        XCTAssertEqual(seenName, prefix, "worker \(tid) running the queue's work is not named after its label")
        // Once its work ended and it parked, its name says idle and no longer the label.
        var after = ""
        let idled = waitFor(seconds: 5) {
            after = threadNames()[tid] ?? "gone"
            return after.hasPrefix("gc.idle.") || after == "gone"
        }
        XCTAssertTrue(idled, "worker \(tid) is still named \(after)")
        XCTAssertNotEqual(after, prefix)
        if after != "gone" { XCTAssertEqual(after, "gc.idle.default") }
    }

    func testEventThreadIsNamed() {
        let fired = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { fired.signal() }
        XCTAssertEqual(fired.wait(timeout: .now() + .seconds(10)), .success)
        let names = Array(threadNames().values)
        // At least the shared loop's thread; other tests in this process start event loops
        // of their own (EventLoopTests), which carry the same name.
        XCTAssertGreaterThanOrEqual(names.filter { $0 == "gc.event" }.count, 1, "threads: \(names.sorted())")
        XCTAssertFalse(names.contains("gc-event"))
    }
}

/// The caller's kernel thread id, from /proc/thread-self (→ /proc/<pid>/task/<tid>).
private func currentThreadID() -> Int32 {
    var buffer = [CChar](repeating: 0, count: 128)
    let n = readlink("/proc/thread-self", &buffer, 127)
    guard n > 0 else { return -1 }
    return Int32(String(cString: buffer).split(separator: "/").last ?? "") ?? -1
}

private func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
