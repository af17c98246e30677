import XCTest
import Glibc
import Synchronization
@testable import GrandCentral

// Signal sources at the engine level (the C test, ctests/source_signal.c, is the main
// evidence; the public Swift API has its own tests): sequential raises count exactly, two
// sources on one signal each get every delivery, the default action does not kill the
// process while a source watches, and cancelling the last source puts the program's
// disposition back.

/// What a test source's handlers see: the data delivered so far, and whether the cancel
/// handler ran.
private final class SignalProbe: @unchecked Sendable {
    let total = Atomic<Int>(0)
    let calls = Atomic<Int>(0)
    let cancelled = Flag()
    var core: SourceCore?
}

private let probeEvent: DispatchFunction = { context in
    let probe = Unmanaged<SignalProbe>.fromOpaque(context!).takeUnretainedValue()
    let data = probe.core!.deliveredData.load(ordering: .acquiring)
    probe.total.wrappingAdd(Int(data), ordering: .sequentiallyConsistent)
    probe.calls.wrappingAdd(1, ordering: .sequentiallyConsistent)
}

private let probeCancel: DispatchFunction = { context in
    Unmanaged<SignalProbe>.fromOpaque(context!).takeUnretainedValue().cancelled.open()
}

final class SignalSourceTests: XCTestCase {
    private func makeSource(_ signal: Int32, _ probe: SignalProbe, queue: DispatchQueue) -> GrandCentral.DispatchSource {
        let source = GrandCentral.DispatchSource.make(type: .signal, handle: UInt(signal), mask: 0, queue: queue)!
        probe.core = source.core
        let context = Unmanaged.passUnretained(probe).toOpaque()
        source.core.setHandler(.event, SourceHandler(function: probeEvent, context: context,
                                                     usesSourceContext: false, dispose: nil))
        source.core.setHandler(.cancel, SourceHandler(function: probeCancel, context: context,
                                                      usesSourceContext: false, dispose: nil))
        return source
    }

    private func handlerIsDefault(_ signal: Int32) -> Bool {
        var current = sigaction()
        XCTAssertEqual(sigaction(signal, nil, &current), 0)
        return current.sa_flags & SA_SIGINFO == 0 && current.__sigaction_handler.sa_handler == nil
    }

    func testRaisesCountExactlyOnTwoSourcesAndTheDefaultActionComesBack() {
        let signal = SIGUSR2
        guard handlerIsDefault(signal) else {
            return XCTFail("SIGUSR2 does not have its default action in the test process")
        }
        let queue = DispatchQueue(label: "tests.signal-source")
        let first = SignalProbe(), second = SignalProbe()
        let a = makeSource(signal, first, queue: queue)
        let b = makeSource(signal, second, queue: queue)
        a.core.activate()
        b.core.activate()
        XCTAssertFalse(handlerIsDefault(signal), "activation installs the library's handler at once")

        for i in 1...5 {
            // The default action would end the test process.
            XCTAssertEqual(raise(signal), 0)
            XCTAssertTrue(eventually { first.total.load(ordering: .sequentiallyConsistent) >= i })
            XCTAssertTrue(eventually { second.total.load(ordering: .sequentiallyConsistent) >= i })
        }
        sleep(milliseconds: 20)
        XCTAssertEqual(first.total.load(ordering: .sequentiallyConsistent), 5)
        XCTAssertEqual(second.total.load(ordering: .sequentiallyConsistent), 5)

        a.core.cancel()
        XCTAssertTrue(first.cancelled.wait())
        XCTAssertFalse(handlerIsDefault(signal), "one source still watches")
        b.core.cancel()
        XCTAssertTrue(second.cancelled.wait())
        XCTAssertTrue(handlerIsDefault(signal), "the last cancel restores the default action")
        withExtendedLifetime((a, b)) {}
    }

    func testASuspendedSourceCoalescesDeliveriesIntoItsData() {
        let signal = SIGUSR2
        let queue = DispatchQueue(label: "tests.signal-source.suspended")
        let probe = SignalProbe()
        let source = makeSource(signal, probe, queue: queue)
        source.core.activate()
        source.core.suspend()
        for _ in 0..<3 {
            XCTAssertEqual(raise(signal), 0)
            // Each raise is read before the next is sent, so none merge in the kernel.
            sleep(milliseconds: 30)
        }
        XCTAssertEqual(probe.calls.load(ordering: .sequentiallyConsistent), 0)
        source.resumeObject(caller: "test")
        XCTAssertTrue(eventually { probe.total.load(ordering: .sequentiallyConsistent) >= 3 })
        XCTAssertEqual(probe.total.load(ordering: .sequentiallyConsistent), 3)
        XCTAssertEqual(probe.calls.load(ordering: .sequentiallyConsistent), 1)
        source.core.cancel()
        XCTAssertTrue(probe.cancelled.wait())
        withExtendedLifetime(source) {}
    }
}
