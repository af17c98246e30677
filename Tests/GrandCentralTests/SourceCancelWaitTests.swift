import XCTest
import Glibc
import Synchronization
@testable import GrandCentral

// dispatch_source_cancel_and_wait (`SourceCore.cancelAndWait`) while the source's target,
// or the queue above it, is suspended and merges race: it returns, and no handler runs after
// it returned, not even once the queue is resumed. Under TSan (scripts/sanitizers.sh) this
// is the race between the caller completing the cancellation and the parked drain that runs
// after the resume. (ctests/source_cancel_wait.c bounds each wait and covers timer and read
// sources.)

private final class CancelWaitProbe: @unchecked Sendable {
    let calls = Atomic<Int>(0)
    let running = Atomic<Int>(0)
    let stop = Atomic<Bool>(false)
}

private let cancelWaitEvent: DispatchFunction = { context in
    let probe = Unmanaged<CancelWaitProbe>.fromOpaque(context!).takeUnretainedValue()
    probe.running.wrappingAdd(1, ordering: .sequentiallyConsistent)
    probe.calls.wrappingAdd(1, ordering: .sequentiallyConsistent)
    probe.running.wrappingSubtract(1, ordering: .sequentiallyConsistent)
}

final class SourceCancelWaitTests: XCTestCase {
    func testCancelAndWaitWhileTheTargetIsSuspendedAndMergesRace() {
        let upper = DispatchQueue(label: "tests.cancel-wait.upper")
        let target = DispatchQueue(label: "tests.cancel-wait.target", target: upper)
        let mergers = DispatchQueue(label: "tests.cancel-wait.merger")
        for round in 0..<2_000 {
            let probe = CancelWaitProbe()
            let source = GrandCentral.DispatchSource.make(type: .dataAdd, handle: 0, mask: 0, queue: target)!
            let core = source.core
            core.setHandler(.event, SourceHandler(function: cancelWaitEvent,
                                                  context: Unmanaged.passUnretained(probe).toOpaque(),
                                                  usesSourceContext: false, dispose: nil))
            core.activate()
            let merged = Flag()
            mergers.async {
                var i = 0
                while !probe.stop.load(ordering: .sequentiallyConsistent) {
                    core.mergeData(1)
                    i += 1
                    if i % 64 == 0 { sched_yield() }
                }
                merged.open()
            }
            if round % 2 == 1 {
                while probe.calls.load(ordering: .sequentiallyConsistent) == 0 { sched_yield() }
            }
            let suspendee: DispatchQueue? = round % 3 == 0 ? target : round % 3 == 1 ? upper : nil
            suspendee?.suspend()
            core.cancelAndWait(caller: "SourceCancelWaitTests")
            XCTAssertEqual(probe.running.load(ordering: .sequentiallyConsistent), 0, "round \(round)")
            let calls = probe.calls.load(ordering: .sequentiallyConsistent)
            suspendee?.resume()
            probe.stop.store(true, ordering: .sequentiallyConsistent)
            XCTAssertTrue(merged.wait(), "round \(round)")
            target.sync {}
            XCTAssertEqual(probe.calls.load(ordering: .sequentiallyConsistent), calls,
                           "round \(round): a handler ran after cancelAndWait")
            withExtendedLifetime(source) {}
        }
    }
}
