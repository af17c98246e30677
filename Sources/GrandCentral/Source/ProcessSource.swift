import CGrandCentral
import Glibc

/// Process sources (DISPATCH_SOURCE_TYPE_PROC): the handle is a pid, the mask some of
/// EXIT, FORK, EXEC, SIGNAL. Linux tells a watcher only about exits (a pidfd becomes
/// readable), so EXIT is the only event ever reported; the other bits are accepted and
/// never fire.
///
/// On activation the monitor opens a pidfd for the process (EventLoopProcesses.swift)
/// and registers it with the event thread; when it becomes readable the process has
/// exited: EXIT is or-ed into the data, once (the registration is one-shot and never
/// re-armed: a process exits once). Nothing reaps the process: the program's waitpid()
/// still works.
///
/// A pid with no process behind it (pidfd_open: ESRCH) reports EXIT at once, as
/// libdispatch on Darwin does (it turns kqueue's ESRCH into a synthetic NOTE_EXIT): the
/// process a program asked about is gone, which is what EXIT means, and a program that
/// waits for the exit must not wait forever. A failure for want of a resource (no
/// descriptor left for the pidfd: EMFILE, ENFILE, ENOMEM; or epoll refusing the pidfd)
/// cancels the source
/// (`SourceCore.cancelForWantOf`, source.h); other failures (a thread id that is not a
/// process) leave a source that never fires, whose cancel handler still runs on cancel.
///
/// `token` is written once by `start` and read by `stop`; the source's lifecycle lock
/// orders the two. The registration holds a +1 reference on the core from `start` until
/// its unregistration completes (or, with nothing registered, until `stop`).
final class ProcessMonitor: SourceMonitor, @unchecked Sendable {
    private var token: ProcessToken?

    func start(_ source: SourceCore) {
        let pid = Int32(truncatingIfNeeded: source.handle)
        let context = Unmanaged.passRetained(source).toOpaque()
        switch EventLoop.shared.registerProcess(pid, handler: processExited, context: context) {
        case .watching(let registered):
            token = registered
        case .gone:
            Unmanaged<SourceCore>.fromOpaque(context).release()
            if source.mask & SourceType.processExit != 0 { source.mergeOr(SourceType.processExit) }
        case .failed(let error):
            Unmanaged<SourceCore>.fromOpaque(context).release()
            if SourceCore.isWantOfResource(error) { source.cancelForWantOf("pidfd_open", error: error) }
        }
    }

    func stop(_ source: SourceCore) {
        guard let token else { return source.monitorDidStop() }
        EventLoop.shared.unregisterProcess(token, completion: processUnregistered,
                                           context: Unmanaged.passUnretained(source).toOpaque())
    }
}

/// Event thread: the pidfd is readable, the process has exited; or epoll refused the
/// pidfd (epoll_ctl: ENOSPC past fs.epoll.max_user_watches, ENOMEM), which the descriptor
/// table reports once as a lone GC_POLL_ERR, and which follows the rule for want of a
/// resource: the library cancels the source. A pidfd's own readiness is never an error
/// (readable, and hung up once reaped), so a lone error is that refusal, not an exit.
private let processExited: DescriptorHandler = { context, events in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeUnretainedValue()
    if events == GC_POLL_ERR {
        source.cancelForWantOf("epoll_ctl", error: 0)
        return
    }
    if source.mask & SourceType.processExit != 0 { source.mergeOr(SourceType.processExit) }
}

/// Event thread: the registration is gone and the pidfd closed; no handler call follows.
private let processUnregistered: DispatchFunction = { context in
    let source = Unmanaged<SourceCore>.fromOpaque(context!).takeRetainedValue()
    source.monitorDidStop()
}
