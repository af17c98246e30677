import CGrandCentral
import Glibc
import Synchronization

/// What a C handle points at. Checked before a type-specific function downcasts a handle.
@usableFromInline
enum ObjectKind: UInt8 {
    case queue, group, semaphore, source, data, io
}

/// The root of every GrandCentral object: the C handle's referent and the Swift API's base
/// class (`DispatchObject` in Swift's Dispatch).
///
/// Two reference counts live here. Swift's ARC owns the memory. The C API's count,
/// `externalRefs`, is the one `dispatch_retain`/`dispatch_release` move: the handle a C
/// `…_create` returns carries one ARC retain and `externalRefs == 1`; when `externalRefs`
/// reaches zero the object is disposed (`externalRefsDidReachZero`) and that ARC retain is
/// dropped. Work in flight holds ARC retains of its own (a queue enqueued on its target, a
/// redirected item's owner), so an object outlives its last `dispatch_release` for as long
/// as work needs it, as in libdispatch.
open class DispatchObject: @unchecked Sendable {
    // Words first, the two bytes last, so a subclass's own bytes can share their word
    // (Swift lays stored properties out in declaration order).
    /// C-side reference count; see above. Starts at 1.
    let externalRefs = Atomic<Int>(1)
    /// `dispatch_set_context`/`dispatch_get_context`. Plain field, like libdispatch's
    /// `do_ctxt`: the client synchronizes setting it with using it.
    var context: UnsafeMutableRawPointer?
    /// `dispatch_set_finalizer_f`: once the object is gone, `finalizer(context)` is submitted
    /// to its target queue, and only if `context` is non-nil (libdispatch's rule: a
    /// finalizer exists to free the context, so without one there is nothing to call it with).
    var finalizer: DispatchFunction?
    /// The target queue of an object that is not a queue (a group, a semaphore), set with
    /// `dispatch_set_target_queue`: where its finalizer runs. A retained `DispatchQueue`, or
    /// 0 for the default (the default-QoS root queue). Queues keep their target themselves
    /// (`DispatchQueue.targetBits`) and never use this word. Exchanged atomically, so that
    /// racing setters each release exactly the reference they replaced; read only by deinit,
    /// when no other reference exists.
    private let objectTargetBits = Atomic<UInt>(0)
    @usableFromInline let kind: ObjectKind
    /// Global objects (root queues, the main queue) ignore retain and release.
    @usableFromInline let isGlobal: Bool

    init(kind: ObjectKind, isGlobal: Bool = false) {
        self.kind = kind
        self.isGlobal = isGlobal
    }

    /// The queue this object's finalizer runs on. Queues override this (their target).
    var finalizerQueue: DispatchQueue? {
        let bits = objectTargetBits.load(ordering: .acquiring)
        if bits == 0 { return DispatchQueue.defaultRootQueue }
        return Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue()
    }

    deinit {
        runFinalizer()  // on the target, which must still be alive
        let bits = objectTargetBits.load(ordering: .acquiring)
        if bits != 0 { Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release() }
    }

    /// Submits `finalizer(context)` to the finalizer queue, once, if both are set. The
    /// queue keeps itself alive while the item is pending. Subclasses whose
    /// `finalizerQueue` depends on state their own deinit tears down call this first.
    final func runFinalizer() {
        guard let finalizer else { return }
        self.finalizer = nil
        guard let context else { return }
        let queue = finalizerQueue ?? DispatchQueue.defaultRootQueue
        queue.enqueue(finalizer, context)
    }

    /// `dispatch_set_target_queue` on an object that is not a queue: nil is the default.
    final func setObjectTarget(_ target: DispatchQueue?) {
        let bits = target.map { UInt(bitPattern: Unmanaged.passRetained($0).toOpaque()) } ?? 0
        let old = objectTargetBits.exchange(bits, ordering: .acquiringAndReleasing)
        if old != 0 { Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: old)!).release() }
    }

    // MARK: C reference counting

    @inline(__always)
    final func retainExternal(_ function: StaticString) {
        if isGlobal { return }
        let old = externalRefs.wrappingAdd(1, ordering: .relaxed).oldValue
        if old <= 0 { clientBug(function, "retain of an object that was already released (resurrection)") }
    }

    @inline(__always)
    final func releaseExternal(_ function: StaticString) {
        if isGlobal { return }
        // acquiringAndReleasing: the thread that drops the last reference must see every
        // other thread's writes before it disposes of the object.
        let old = externalRefs.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue
        if old > 1 { return }
        releasedLastExternal(old, function)
    }

    /// `releaseExternal` found the count at `old` (1: this was the last reference; below:
    /// an over-release). Out of line, so that the common release stays a few instructions.
    @inline(never)
    private final func releasedLastExternal(_ old: Int, _ function: StaticString) {
        if old < 1 { clientBug(function, "over-release: the object's reference count was already zero") }
        externalRefsDidReachZero()
        Unmanaged.passUnretained(self).release()
    }

    /// Called once, when the C reference count reaches zero, before the handle's ARC
    /// retain is dropped. Subclasses check for misuse (releasing a suspended queue) here.
    func externalRefsDidReachZero() {}

    // MARK: Description (`dispatch_debug`)
    //
    // One shape for every kind, so a reader learns it once (the README's "Diagnostics"):
    //
    //     <kind>[0x<address>] = { <field> = <value>, <field> = <value>, ... }
    //
    // <kind> is `queue`, `group`, `semaphore`, `source`, `data` or `io`; the address is the
    // C handle's. The engine writes the part in braces (`debugDescription()`); the C ABI,
    // which alone knows an object's handle, puts `<kind>[0x<address>] = ` in front
    // (GrandCentralExports/Handles.swift). The fields are the kind's own, in a fixed order:
    // its name or type first if it has one (a queue's label, a source's type, a channel's
    // type), then `refcount` (the C reference count; `global` for objects that ignore retain
    // and release), then its state. Strings are in double quotes, counts in decimal, flags
    // `true` or `false`.

    /// The fields of the description `dispatch_debug` prints, `{ <field> = <value>, ... }`
    /// (see above). Kinds override it.
    func debugDescription() -> String { describe([("refcount", debugRefcount)]) }

    /// `refcount`'s value: the C reference count, or `global`.
    final var debugRefcount: String { isGlobal ? "global" : "\(externalRefs.load(ordering: .relaxed))" }

    /// `{ <field> = <value>, ... }` with `fields` in order.
    final func describe(_ fields: [(String, String)]) -> String {
        "{ " + fields.map { "\($0.0) = \($0.1)" }.joined(separator: ", ") + " }"
    }

    /// A string value in a description: in double quotes.
    static func quoted(_ text: String) -> String { "\"" + text + "\"" }

    // MARK: Polymorphic operations (queues and sources override them; for any other object
    // suspend, resume and activate do nothing)

    func suspendObject() {}
    func resumeObject(caller: StaticString) {}
    func activateObject() {}
    /// Queues and sources retarget their work; any other object only moves its finalizer.
    func setTargetObject(_ target: DispatchQueue?, caller: StaticString) {
        if !isGlobal { setObjectTarget(target) }
    }

    // MARK: Swift API (spelled like Swift's Dispatch)

    /// Activates an inactive queue (or source).
    public func activate() { activateObject() }
    /// Suspends the invocation of work items on this object.
    public func suspend() { suspendObject() }
    /// Resumes the invocation of work items on this object.
    public func resume() { resumeObject(caller: "DispatchObject.resume()") }
    /// Sets the target queue of this object.
    public func setTarget(queue: DispatchQueue) { setTargetObject(queue, caller: "DispatchObject.setTarget(queue:)") }
}
