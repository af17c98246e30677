import CGrandCentral
import Glibc

/// Signal sources: the handle is a signal number (1...64), and each delivery the event
/// thread's signalfd reads merges 1 into the data (`mergeAdd`), so the handler sees how many
/// deliveries arrived since it last ran. Every source on a signal gets every delivery.
///
/// Start, in the activating thread and in this order: the event thread's id (waiting, once,
/// for the thread to have blocked every signal), then `gc_signal_watch`, which on the first
/// source for the signal installs the library's catching handler synchronously, so a
/// `raise()` right after `dispatch_activate` is never fatal; then the registration with the
/// event thread, which holds a +1 retain on the core until its unregistration completes.
/// A signal caught between the two stays pending on the event thread until the registration
/// puts it in the signalfd's mask, and is then delivered (EventLoopSignals.swift).
///
/// Stop: `gc_signal_unwatch` first (the last source gives the program its disposition back
/// at once), then the unregistration; `monitorDidStop()` runs on the event thread once the
/// registration is out of the table, so no merge follows it.
///
/// Suspension needs nothing: deliveries keep merging into the data while the source is
/// suspended and reach the handler, coalesced, on resume.
///
/// Counting: a standard signal sent several times before the event thread reads it is
/// pending once (the kernel merges it), so it counts at least once, not once per send.
///
/// `registration` is written once by `start` and read by `stop`; the source's lifecycle
/// lock orders them.
final class SignalMonitor: SourceMonitor, @unchecked Sendable {
    private var registration: SignalToken?

    func start(_ source: SourceCore) {
        let signal = Int32(truncatingIfNeeded: source.handle)
        let loop = EventLoop.shared
        // An uncatchable signal (SIGKILL, SIGSTOP, the C library's own) fails here and is
        // still counted (unwatch balances it); the signalfd may or may not read it.
        _ = gc_signal_watch(signal, loop.waitForEventThreadSignalsBlocked())
        // The registration's reference, released when the unregistration completes.
        let context = Unmanaged.passRetained(source).toOpaque()
        registration = loop.registerSignal(signal, handler: signalReceived, context: context)
    }

    func stop(_ source: SourceCore) {
        guard let registration else { return source.monitorDidStop() }
        gc_signal_unwatch(registration.registration.signal)
        EventLoop.shared.unregisterSignal(registration, completion: signalUnregistered,
                                          context: Unmanaged.passUnretained(source).toOpaque())
    }
}

/// Event thread: one delivery of the source's signal.
private let signalReceived: SignalHandler = { context in
    Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue().mergeAdd(1)
}

/// Event thread: the registration is gone; no delivery follows.
private let signalUnregistered: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.monitorDidStop()
}
