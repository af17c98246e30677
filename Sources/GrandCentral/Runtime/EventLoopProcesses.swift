import CGrandCentral
import Glibc

// Process exits on the event thread: what process sources are built on.
//
// Protocol: `registerProcess(pid, handler:context:)` opens a pidfd for the process on
// the caller's thread (so "no such process" is known at once) and registers it for read
// readiness in the descriptor table (EventLoopDescriptors.swift); the pidfd becomes
// readable when the process exits — child or not, and a zombie counts as exited — and
// stays readable, so the one-shot registration reports it exactly once, whenever the
// registration reaches the event thread. `unregisterProcess` removes the registration,
// closes the pidfd and then calls `completion(context)` on the event thread; after that
// the handler is never called again.
//
// The library never reaps the process: a pidfd only watches, so the program's own
// waitpid() still gets the status. The pidfd is the library's own descriptor, closed
// only after its unregistration completed, so its number cannot be reused while an
// event for it is in flight (the descriptor table's generations would drop one anyway).
//
// Rejected: a SIGCHLD handler plus waitid(WNOWAIT) polling (children only, and it takes
// a signal the program may use itself); polling /proc (a wakeup per tick).

/// A process being watched.
struct ProcessToken: Sendable {
    let descriptor: Int32
    let registration: DescriptorToken
}

/// What `registerProcess` found.
enum ProcessRegistration: Sendable {
    /// Watching: the handler will be called once, when the process exits.
    case watching(ProcessToken)
    /// No such process (it exited and was reaped, or never existed). Nothing registered.
    case gone
    /// pidfd_open failed otherwise (the negative errno: out of descriptors, a thread id
    /// rather than a process id, ...). Nothing registered.
    case failed(Int32)
}

/// The context an unregistration carries to the event thread.
private final class ProcessUnregistration {
    let descriptor: Int32
    let completion: DispatchFunction
    let context: UnsafeMutableRawPointer?

    init(descriptor: Int32, completion: DispatchFunction, context: UnsafeMutableRawPointer?) {
        self.descriptor = descriptor
        self.completion = completion
        self.context = context
    }
}

extension EventLoop {
    /// Watches process `pid` for its exit: `handler(context, events)` is called once on
    /// the event thread when it has exited. Any thread.
    func registerProcess(_ pid: Int32, handler: DescriptorHandler,
                         context: UnsafeMutableRawPointer?) -> ProcessRegistration {
        let descriptor = gc_pidfd_open(pid)
        if descriptor == -ESRCH { return .gone }
        if descriptor < 0 { return .failed(descriptor) }
        let registration = registerDescriptor(descriptor, interest: .read, handler: handler, context: context)
        return .watching(ProcessToken(descriptor: descriptor, registration: registration))
    }

    /// Stops watching; closes the pidfd and calls `completion(context)` on the event
    /// thread, after which the handler is never called again. At most once per token.
    /// Any thread.
    func unregisterProcess(_ token: ProcessToken, completion: DispatchFunction,
                           context: UnsafeMutableRawPointer?) {
        let box = ProcessUnregistration(descriptor: token.descriptor, completion: completion, context: context)
        unregisterDescriptor(token.registration, completion: processUnregistered,
                             context: Unmanaged.passRetained(box).toOpaque())
    }
}

/// Event thread: the pidfd's registration is gone; close it and tell the owner.
private let processUnregistered: DispatchFunction = { raw in
    let box = Unmanaged<ProcessUnregistration>.fromOpaque(raw!).takeRetainedValue()
    _ = gc_descriptor_close(box.descriptor)
    box.completion(box.context)
}
