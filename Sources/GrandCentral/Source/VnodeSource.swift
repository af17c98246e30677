/// Vnode sources (DISPATCH_SOURCE_TYPE_VNODE): the handle is an open descriptor, the mask
/// some of the DISPATCH_VNODE_* changes to the file it refers to. The monitor registers
/// one file registration with the event thread (EventLoopFiles.swift, inotify), which
/// reports each change the mask asks for; the changes are or-ed into the data until the
/// event handler takes them. FUNLOCK is accepted and never reported (Linux has no such
/// event).
///
/// Activation waits until the watch is in place, so a change made after
/// `dispatch_activate`/`dispatch_resume` returns is seen. A descriptor inotify cannot
/// watch (closed, not a descriptor at all) gives a source that never fires; its cancel
/// handler still runs on cancel. A watch that cannot be had for want of a resource (no
/// descriptor for the inotify instance, no watch left: EMFILE, ENFILE, ENOMEM, ENOSPC)
/// cancels the source (`SourceCore.cancelForWantOf`, source.h). The library never closes the caller's descriptor; the
/// caller keeps it open until the cancel handler has run (the monitor compares fstat of
/// it between events).
///
/// `token` is written once by `start` and read by `stop`; the source's lifecycle lock
/// orders the two. The registration holds a +1 reference on the core from `start` until
/// its unregistration completes (or, with nothing registered, until `start` returns).
final class VnodeMonitor: SourceMonitor, @unchecked Sendable {
    private var token: FileToken?

    func start(_ source: SourceCore) {
        let context = Unmanaged.passRetained(source).toOpaque()
        let (registered, error) = EventLoop.shared.registerFile(Int32(truncatingIfNeeded: source.handle),
                                                                changes: FileChanges(rawValue: source.mask),
                                                                handler: fileChanged, context: context)
        token = registered
        if registered == nil {
            Unmanaged<SourceCore>.fromOpaque(context).release()
            if SourceCore.isWantOfResource(error) { source.cancelForWantOf("inotify", error: error) }
        }
    }

    func stop(_ source: SourceCore) {
        guard let token else { return source.monitorDidStop() }
        EventLoop.shared.unregisterFile(token, completion: fileUnregistered,
                                        context: Unmanaged.passUnretained(source).toOpaque())
    }
}

/// Event thread: the file changed in ways the source asked about.
private let fileChanged: FileHandler = { context, changes in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
    source.mergeOr(changes)
}

/// Event thread: the registration is gone; no handler call follows.
private let fileUnregistered: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.monitorDidStop()
}
