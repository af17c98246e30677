/// Swift's `DispatchSource`: what Swift code holds, over the engine's `SourceCore` (which
/// is also the C handle, `dispatch_source_t`). Swift's references are this object's: when
/// the last one goes, the source is cancelled without running its cancel handler, as
/// Dispatch does with a released source; the core lives on only until its monitor has
/// stopped.
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

    /// A source of `type`; nil when the type does not accept the handle or mask.
    static func make(type: SourceType, handle: UInt, mask: UInt, queue: DispatchQueue?) -> DispatchSource? {
        SourceCore.make(type: type, handle: handle, mask: mask, queue: queue).map { DispatchSource(core: $0) }
    }

    deinit {
        core.cancel(runCancelHandler: false)
    }

    override var finalizerQueue: DispatchQueue? { core.target }
    override func debugDescription() -> String { core.debugDescription() }
    override func suspendObject() { core.suspendObject() }
    override func resumeObject(caller: StaticString) { core.resumeObject(caller: caller) }
    override func activateObject() { core.activateObject() }
    override func setTargetObject(_ target: DispatchQueue?, caller: StaticString) { core.setTarget(target) }
}
