import CGrandCentral
import Glibc

/// Read and write sources: one registration (read or write interest) on the event
/// thread's descriptor table (EventLoopDescriptors.swift), which shares one epoll
/// registration among all sources on a descriptor and drops stale events by generation.
///
/// The registration is one-shot: readiness is reported once, merged as the source's data
/// (replacing what was pending: the latest count is the truth), and the registration
/// stays disarmed until the event handler has returned (`eventHandlerDidReturn` re-arms
/// it). So the event thread never spins on a descriptor that stays ready — an unread
/// socket, a peer that hung up, a descriptor in error — not even while the source is
/// suspended (no handler runs, so nothing re-arms); and a source on a descriptor that
/// stays ready fires again each time its handler returns, as a level-triggered kqueue
/// source does.
///
/// Data: a read source reports the bytes readable (0 at end of file or on an error: the
/// handler finds out which with read(2)); on a regular file, which epoll cannot watch and
/// which is therefore always ready, the bytes from the file position to the end; on a
/// listening socket the connections waiting to be accepted (the accept queue's length for
/// TCP, as kqueue reports it; 1 for other families, which cannot tell — libdispatch on
/// Linux reports 1 for every listening socket), so an accept loop may trust it. A write
/// source reports an estimate of the buffer space. The library never closes the caller's
/// descriptor.
///
/// `registration` is written once by `start`, before the registration is pushed to the
/// event thread, and read by `stop` and `eventHandlerDidReturn`; the source's lifecycle
/// lock orders start before stop, and the drain (which calls `eventHandlerDidReturn`) runs
/// only after an event the push made possible, so after the store.
final class DescriptorMonitor: SourceMonitor, @unchecked Sendable {
    let interest: DescriptorInterest
    private var registration: DescriptorToken?

    init(interest: DescriptorInterest) {
        self.interest = interest
    }

    func start(_ source: SourceCore) {
        // The registration's reference, released when the unregistration completes.
        let context = Unmanaged.passRetained(source).toOpaque()
        let handler: DescriptorHandler = interest == .read ? descriptorReadable : descriptorWritable
        let token = EventLoop.shared.makeDescriptorRegistration(Int32(truncatingIfNeeded: source.handle),
                                                                interest: interest, handler: handler, context: context)
        // Stored before registering: the first readiness can be reported, and the handler
        // run and return (`eventHandlerDidReturn` reads this to re-arm), before
        // `registerDescriptor` returns. The inbox push publishes the store.
        registration = token
        EventLoop.shared.registerDescriptor(token)
    }

    func stop(_ source: SourceCore) {
        guard let registration else { return source.monitorDidStop() }
        EventLoop.shared.unregisterDescriptor(registration, completion: descriptorUnregistered,
                                              context: Unmanaged.passUnretained(source).toOpaque())
    }

    func eventHandlerDidReturn(_ source: SourceCore) {
        if let registration { EventLoop.shared.rearmDescriptor(registration) }
    }
}

/// Event thread: a read source's descriptor is readable (or in error, or hung up).
private let descriptorReadable: DescriptorHandler = { context, events in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
    let fd = Int32(truncatingIfNeeded: source.handle)
    source.mergeReplace(UInt(gc_descriptor_readable_bytes(fd)))
}

/// Event thread: a write source's descriptor is writable (or in error).
private let descriptorWritable: DescriptorHandler = { context, events in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
    let fd = Int32(truncatingIfNeeded: source.handle)
    let space = events & GC_POLL_OUT != 0 ? UInt(gc_descriptor_writable_bytes(fd)) : 0
    source.mergeReplace(space)
}

/// Event thread: the registration is gone; no handler call follows.
private let descriptorUnregistered: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.monitorDidStop()
}
