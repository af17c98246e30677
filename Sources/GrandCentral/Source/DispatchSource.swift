import Glibc

/// A dispatch source: the C handle (`dispatch_source_t`) and Swift's `DispatchSource`.
///
/// This is the client's side of a source; the engine's is its `SourceCore` (see
/// SourceCore.swift for why there are two). The client's references are this object's:
/// when the last one goes (the last `dispatch_release`, or Swift's last reference), the
/// source is cancelled without running its cancel handler, as libdispatch does with a
/// released source; the core lives on only until its monitor has stopped.
///
/// It conforms to the source protocols Dispatch's does; the protocols and their members are
/// the Swift API (SwiftAPI/DispatchSourceAPI.swift), which also has the subclasses for
/// process and file system object sources.
public class DispatchSource: DispatchObject, DispatchSourceProtocol, DispatchSourceRead, DispatchSourceWrite,
    DispatchSourceSignal, DispatchSourceTimer, DispatchSourceUserDataAdd, DispatchSourceUserDataOr,
    DispatchSourceUserDataReplace, @unchecked Sendable {
    let core: SourceCore

    init(core: SourceCore) {
        self.core = core
        super.init(kind: .source)
    }

    /// `dispatch_source_create`: nil when the type does not accept the handle or mask.
    static func make(type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?) -> DispatchSource? {
        makeCore(type: type, handle: handle, mask: mask, queue: queue).map { DispatchSource(core: $0) }
    }

    /// The engine of a new source (nil when the type does not accept the handle or mask),
    /// for `make` and for the Swift API's subclasses.
    static func makeCore(type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?) -> SourceCore? {
        guard type.accepts(handle: handle, mask: mask) else { return nil }
        let target = queue ?? RootQueues.queue(qos: .default, overcommit: false)
        return SourceCore(type: type, handle: handle, mask: mask, target: target)
    }

    deinit {
        runFinalizer()  // on the target, while the core (which holds it) is alive
        core.cancel(runCancelHandler: false)
    }

    override var context: UnsafeMutableRawPointer? {
        get { core.context }
        set { core.context = newValue }
    }

    override var finalizerQueue: DispatchQueue? { core.target }

    override func externalRefsDidReachZero() {
        let s = SourceState(core.state.load(ordering: .acquiring))
        if s.has(SourceState.inactive) { clientBug("dispatch_release", "release of an inactive object") }
        if s.suspendCount > 0 { clientBug("dispatch_release", "release of a suspended object") }
    }

    override func debugDescription() -> String { core.debugDescription() }

    override func suspendObject() { core.suspend() }
    override func resumeObject(caller: StaticString) { core.resume(caller: caller) }
    override func activateObject() { core.activate() }
    override func setTargetObject(_ target: DispatchQueue?, caller: StaticString) { core.setTarget(target) }
}
