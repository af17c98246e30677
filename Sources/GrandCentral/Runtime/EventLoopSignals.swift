import CGrandCentral
import Glibc
import Synchronization

// Signals on the event thread: what signal sources are built on.
//
// Protocol, per registration (one signal number, a handler and its context):
//   register → from the pass that applies it, `handler(context)` is called on the event
//   thread once per delivery of the signal that the signalfd reads; `unregisterSignal`
//   takes it out of the table and then calls `completion(context)` on the event thread:
//   the handler is never called after that. Every registration on a signal gets every
//   delivery.
//
// The process has one signalfd, owned by the event thread (created with the first
// registration, never closed), in the loop's epoll set with generation 0 like the loop's
// own descriptors (`EventLoop.internalData`), level-triggered: each report is read until
// the signalfd says EAGAIN, so nothing is left to report again. Its mask is the union of
// the registered signals, recomputed after each batch of commands. After every mask change
// the loop reads the signalfd at once, so a signal that became pending before its
// registration arrived (a `raise` right after activation) is delivered in that pass.
//
// How a signal reaches the signalfd (see Sources/CGrandCentral/signal.c): the event thread
// blocks every signal (`blockSignalsOnEventThread`, first thing in its loop); the signal
// source itself, before it registers here, makes the library catch the signal process-wide
// (`gc_signal_watch`), and the catching handler re-sends it to this thread with tgkill. A
// signal the program blocks in every thread stays pending for the process; the signalfd
// reads that as well.
//
// A known gap: the signalfd reads the process's pending set as well as this thread's, so a
// signal sent to the process (kill) can be taken here, in the instant between the kernel
// choosing a thread of the program to run the handler and that thread doing so. The source
// counts it all the same; the program's own handler is not called for that instance (the
// event thread never calls it). Signals sent to a thread (raise, pthread_kill) reach that
// thread's handler every time. Telling the two apart (ssi_code/ssi_pid of a re-sent
// signal are SI_TKILL/our pid) and re-queueing the stolen instance for the program would
// close the gap; rejected for now as it loops on a signal the program blocks everywhere.
//
// Coalescing: the kernel keeps at most one instance of a standard (non-real-time) signal
// pending per thread and one per process, so signals sent several times before the event
// thread reads them count at least once, not once per send. Real-time signals queue and
// count one per send.
//
// Not done, and why: no pending signal is read out (dropped) when a signal leaves the mask.
// Such a read would race with a new source on the same signal whose registration is still
// in the inbox, and could swallow the `raise` it was activated for. The price: an instance
// the handler re-sent just before the last source was cancelled may stay pending on the
// event thread and reach the next source for that signal.

/// Called on the event thread, once per delivery, with the registration's context.
typealias SignalHandler = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// One source's interest in one signal.
///
/// `signal`, `handler`, `context`: immutable. `isRegistered`: the event thread only.
final class SignalRegistration: @unchecked Sendable {
    let signal: Int32
    let handler: SignalHandler
    let context: UnsafeMutableRawPointer?
    var isRegistered = false

    init(signal: Int32, handler: SignalHandler, context: UnsafeMutableRawPointer?) {
        self.signal = signal
        self.handler = handler
        self.context = context
    }
}

/// A registration, for `unregisterSignal`.
typealias SignalToken = RegistrationToken<SignalRegistration>

/// The registered signals and the signalfd. Owned by the event thread (no lock).
struct SignalTable {
    /// The signalfd, -1 until the first registration.
    var descriptor: Int32 = -1
    /// The mask the signalfd was last given (bit signo - 1).
    var appliedMask: UInt64 = 0
    /// Registrations by signal number (index 0 unused).
    private var watchers = [[SignalRegistration]](repeating: [], count: Int(GC_SIGNAL_MAX) + 1)

    /// The union of the registered signals.
    var wantedMask: UInt64 {
        var mask: UInt64 = 0
        for signal in 1...Int(GC_SIGNAL_MAX) where !watchers[signal].isEmpty {
            mask |= 1 << UInt64(signal - 1)
        }
        return mask
    }

    mutating func add(_ registration: SignalRegistration) {
        watchers[Int(registration.signal)].append(registration)
        registration.isRegistered = true
    }

    mutating func remove(_ registration: SignalRegistration) {
        guard registration.isRegistered else { return }
        watchers[Int(registration.signal)].removeAll { $0 === registration }
        registration.isRegistered = false
    }

    func registrations(of signal: Int32) -> [SignalRegistration] {
        signal >= 1 && signal <= GC_SIGNAL_MAX ? watchers[Int(signal)] : []
    }
}

extension EventLoop {
    // MARK: - Signal API (any thread)

    /// The event thread's kernel thread id, waiting for the thread to have started and
    /// blocked every signal (at most once per process, at the first signal source, and
    /// only for as long as a new thread takes to start). Any thread but the event thread.
    func waitForEventThreadSignalsBlocked() -> Int32 {
        var spins = 0
        while true {
            let id = kernelThreadID.load(ordering: .acquiring)
            if id != 0 { return id }
            spins += 1
            if spins < 100 { sched_yield() } else { usleep(100) }
        }
    }

    /// Registers `handler(context)` to be called on the event thread for every delivery of
    /// `signal` that the signalfd reads. The caller makes the signal reach the signalfd
    /// (`gc_signal_watch`). Any thread.
    func registerSignal(_ signal: Int32, handler: SignalHandler, context: UnsafeMutableRawPointer?) -> SignalToken {
        let registration = SignalRegistration(signal: signal, handler: handler, context: context)
        signalInbox.register(registration)
        requestWakeup()
        return SignalToken(registration: registration)
    }

    /// Unregisters; then calls `completion(context)` on the event thread, after which the
    /// handler is never called again. At most once per token. Any thread.
    func unregisterSignal(_ token: SignalToken, completion: DispatchFunction, context: UnsafeMutableRawPointer?) {
        signalInbox.unregister(token.registration, completion: completion, context: context)
        requestWakeup()
    }

    // MARK: - Event thread

    /// First thing the event thread does: no signal handler may ever run on it (it is the
    /// library's thread, and a signal re-sent to it must stay pending for its signalfd).
    /// Publishes its kernel thread id for `waitForEventThreadSignalsBlocked` (release: the
    /// mask is in place before anyone may send signals here).
    func blockSignalsOnEventThread() {
        kernelThreadID.store(gc_signal_block_all_in_thread(), ordering: .releasing)
    }

    /// Applies registration changes and brings the signalfd's mask in line; a new signal in
    /// the mask is read at once.
    func drainSignalInbox() {
        if applySignalCommands() { deliverSignals() }
    }

    /// Applies registration changes, then brings the signalfd's mask in line. Returns
    /// whether the mask changed.
    private func applySignalCommands() -> Bool {
        let changed = signalInbox.drain(register: { signals.add($0) }, unregister: { signals.remove($0) })
        guard changed else { return false }
        let wanted = signals.wantedMask
        if wanted == signals.appliedMask { return false }
        if signals.descriptor < 0 && reservedSignalDescriptor >= 0 {
            // Made at load and already in the epoll: give it its first mask.
            signals.descriptor = EventLoop.check(gc_signalfd_update(reservedSignalDescriptor, wanted), "signalfd")
        } else if signals.descriptor < 0 {
            signals.descriptor = EventLoop.check(gc_signalfd_update(-1, wanted), "signalfd")
            _ = EventLoop.check(gc_poll_control(poll, GC_POLL_ADD, signals.descriptor, GC_POLL_IN,
                                                EventLoop.internalData(signals.descriptor)), "epoll_ctl")
        } else {
            _ = EventLoop.check(gc_signalfd_update(signals.descriptor, wanted), "signalfd")
        }
        signals.appliedMask = wanted
        return true
    }

    /// Whether `descriptor` (reported with generation 0) is the signalfd; if so, reads it
    /// and delivers.
    func handleSignalDescriptor(_ descriptor: Int32) -> Bool {
        guard descriptor == signals.descriptor, descriptor >= 0 else { return false }
        deliverSignals()
        return true
    }

    /// Reads the signalfd until it is empty and calls every registration on each signal
    /// read, once per signal read.
    ///
    /// Registrations still in the inbox are applied after each read and before its
    /// delivery: a source activated before the signal was sent is then in the table. (The
    /// activating thread pushed its registration before the signal was sent, and the kernel
    /// orders that send before this read, so the inbox drain after the read sees the push.
    /// Without it, a second source on an already watched signal could miss a `raise` made
    /// right after its activation.)
    private func deliverSignals() {
        guard signals.descriptor >= 0 else { return }
        let capacity = 16
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: capacity) { buffer in
            while true {
                let count = gc_signalfd_read(signals.descriptor, buffer.baseAddress!, Int32(capacity))
                if count <= 0 { return }  // -EAGAIN: empty (no other error is expected)
                // A mask change here is fine: the loop reads until the signalfd is empty
                // (one more read, answered EAGAIN).
                _ = applySignalCommands()
                for i in 0..<Int(count) {
                    for registration in signals.registrations(of: buffer[i]) {
                        registration.handler(registration.context)
                    }
                }
            }
        }
    }
}
