import XCTest
import Glibc
import Synchronization
import CGrandCentral
@testable import GrandCentral

// Process and vnode sources at the engine level: the monitors and their event-thread
// registrations, driven through `GrandCentral.DispatchSource.make` and the core's handlers. Light on
// purpose: ctests/source_proc.c and ctests/source_vnode.c are the main evidence (they fork,
// which an XCTest process with Foundation's threads should not).

/// What a source's handlers saw.
private final class SourceProbe: @unchecked Sendable {
    let events = Counter()
    let cancels = Counter()
    let seen = Atomic<UInt>(0)
    var source: GrandCentral.DispatchSource?
}

private let probeEvent: DispatchFunction = { context in
    let probe = Unmanaged<SourceProbe>.fromOpaque(context!).takeUnretainedValue()
    probe.seen.bitwiseOr(probe.source!.core.deliveredData.load(ordering: .acquiring), ordering: .sequentiallyConsistent)
    probe.events.increment()
}

private let probeCancel: DispatchFunction = { context in
    Unmanaged<SourceProbe>.fromOpaque(context!).takeUnretainedValue().cancels.increment()
}

final class ProcessVnodeSourceTests: XCTestCase {
    private func makeSource(_ type: SourceType, handle: UInt, mask: UInt, probe: SourceProbe) -> GrandCentral.DispatchSource {
        let queue = DispatchQueue(label: "com.grandcentral.tests.procvnode")
        let source = GrandCentral.DispatchSource.make(type: type, handle: handle, mask: mask, queue: queue)!
        probe.source = source
        let context = Unmanaged.passUnretained(probe).toOpaque()
        source.core.setHandler(.event, SourceHandler(function: probeEvent, context: context,
                                                     usesSourceContext: false, dispose: nil))
        source.core.setHandler(.cancel, SourceHandler(function: probeCancel, context: context,
                                                      usesSourceContext: false, dispose: nil))
        return source
    }

    private func cancel(_ source: GrandCentral.DispatchSource, _ probe: SourceProbe, expectingEvents events: Int) {
        source.core.cancel()
        XCTAssertTrue(eventually { probe.cancels.value == 1 }, "the cancel handler did not run")
        sleep(milliseconds: 50)
        XCTAssertEqual(probe.cancels.value, 1)
        XCTAssertEqual(probe.events.value, events)
        probe.source = nil
    }

    func testProcessExitIsReportedOnceAndTheChildCanStillBeReaped() throws {
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup("sleep 0.3; exit 4"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ), 0)
        let probe = SourceProbe()
        let source = makeSource(.process, handle: UInt(pid), mask: SourceType.processExit, probe: probe)
        source.core.activate()
        XCTAssertTrue(eventually { probe.events.value == 1 }, "no EXIT")
        XCTAssertEqual(probe.seen.load(ordering: .sequentiallyConsistent), SourceType.processExit)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid, "the library reaped the child")
        XCTAssertEqual((status >> 8) & 0xff, 4)
        sleep(milliseconds: 50)
        cancel(source, probe, expectingEvents: 1)
    }

    func testProcessThatDoesNotExistReportsExitAtOnce() {
        // pid_max is at most 2^22: this one names no process.
        let probe = SourceProbe()
        let source = makeSource(.process, handle: UInt(Int32.max), mask: SourceType.processExit, probe: probe)
        source.core.activate()
        XCTAssertTrue(eventually { probe.events.value == 1 })
        XCTAssertEqual(probe.seen.load(ordering: .sequentiallyConsistent), SourceType.processExit)
        cancel(source, probe, expectingEvents: 1)
    }

    func testVnodeSourceSeesWriteExtendAndDelete() {
        var template = Array("/tmp/gc-xctest-vnode-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let path = String(cString: template)
        let probe = SourceProbe()
        let mask = SourceType.vnodeWrite | SourceType.vnodeExtend | SourceType.vnodeDelete
        let source = makeSource(.vnode, handle: UInt(fd), mask: mask, probe: probe)
        source.core.activate()  // returns once the file is watched
        XCTAssertEqual(write(fd, "grow", 4), 4)
        let grew = SourceType.vnodeWrite | SourceType.vnodeExtend
        XCTAssertTrue(eventually { probe.seen.load(ordering: .sequentiallyConsistent) & grew == grew })
        unlink(path)
        XCTAssertTrue(eventually { probe.seen.load(ordering: .sequentiallyConsistent) & SourceType.vnodeDelete != 0 })
        XCTAssertEqual(probe.seen.load(ordering: .sequentiallyConsistent) & ~mask, 0)
        cancel(source, probe, expectingEvents: probe.events.value)
    }

    func testVnodeSourceOnAClosedDescriptorNeverFiresAndCancels() {
        let probe = SourceProbe()
        let source = makeSource(.vnode, handle: 4000, mask: SourceType.vnodeWrite, probe: probe)
        source.core.activate()
        sleep(milliseconds: quietPeriodMilliseconds)
        cancel(source, probe, expectingEvents: 0)
    }

    func testFileChangesMapToInotifyEvents() {
        XCTAssertEqual(FileChanges([]).watchEvents, 0)
        XCTAssertEqual(FileChanges(rawValue: SourceType.vnodeFunlock).watchEvents, 0)
        XCTAssertNotEqual(FileChanges.write.watchEvents & GC_WATCH_MODIFY, 0)
        XCTAssertNotEqual(FileChanges.delete.watchEvents & GC_WATCH_DELETE_SELF, 0)
        XCTAssertNotEqual(FileChanges.rename.watchEvents & GC_WATCH_MOVE_SELF, 0)
        XCTAssertEqual(FileChanges.delete.rawValue, SourceType.vnodeDelete)
        XCTAssertEqual(FileChanges.revoke.rawValue, SourceType.vnodeRevoke)
    }
}
