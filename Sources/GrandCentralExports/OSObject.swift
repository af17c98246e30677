import CGrandCentral
import Glibc
import Synchronization

// libdispatch's _os_object_* calls (private.h): the reference counting of the object
// system libdispatch's objects belong to on Darwin. An _os_object starts with
//
//     const struct { void (*xref_dispose)(obj); void (*dispose)(obj); } *isa;
//     int ref_cnt;    // internal references, minus one (0 = one reference, -1 = dead)
//     int xref_cnt;   // external references, minus one
//
// (INT_MAX in either count marks an immortal global object). The external count reaching
// -1 calls isa->xref_dispose, or drops the internal reference; the internal count reaching
// -1 calls isa->dispose, or frees the object. Resurrecting a dead object, and releasing
// below -1, are client bugs.
//
// Two kinds of pointer reach these calls here:
//   - objects made by _os_object_alloc(_realized): counted as above, in that layout;
//   - GrandCentral's own dispatch objects (queues, groups, sources, ...), which are Swift
//     objects with one count: every retain is dispatch_retain, every release
//     dispatch_release, as libdispatch's dispatch objects are _os_objects whose counts
//     these calls move.
// The set of live _os_object_alloc pointers tells them apart (these calls are rare, and
// the lookup is a hash probe).

private let objectsLock = SpinLock()
nonisolated(unsafe) private var allocatedObjects = Set<UInt>()

private let globalCount = Int32.max
private let refOffset = 8
private let xrefOffset = 12

private func isAllocated(_ p: UnsafeMutableRawPointer) -> Bool {
    objectsLock.withLock { allocatedObjects.contains(UInt(bitPattern: p)) }
}

/// Adds `delta` to the count at `offset` unless it is immortal; returns the new value.
private func addCount(_ p: UnsafeMutableRawPointer, _ offset: Int, _ delta: Int32) -> Int32 {
    let word = (p + offset).assumingMemoryBound(to: UInt32.self)
    if Int32(bitPattern: gc_word_load(word)) == globalCount { return globalCount }
    return Int32(bitPattern: gc_word_add(word, UInt32(bitPattern: delta))) &+ delta
}

private func callHook(_ p: UnsafeMutableRawPointer, slot: Int) -> Bool {
    guard let isa = p.load(as: UnsafeRawPointer?.self) else { return false }
    typealias Hook = @convention(c) (UnsafeMutableRawPointer) -> Void
    guard let hook = isa.load(fromByteOffset: slot * MemoryLayout<UnsafeRawPointer>.size, as: Hook?.self) else {
        return false
    }
    hook(p)
    return true
}

@_cdecl("_os_object_alloc_realized")
public func _os_object_alloc_realized(_ cls: UnsafeRawPointer?, _ size: Int) -> UnsafeMutableRawPointer {
    guard let p = calloc(1, max(size, 16)) else {
        gc_write_stderr("GrandCentral: _os_object_alloc: out of memory\n")
        abort()
    }
    p.storeBytes(of: cls, as: UnsafeRawPointer?.self)
    _ = objectsLock.withLock { allocatedObjects.insert(UInt(bitPattern: p)) }
    return p
}

@_cdecl("_os_object_alloc")
public func _os_object_alloc(_ cls: UnsafeRawPointer?, _ size: Int) -> UnsafeMutableRawPointer {
    _os_object_alloc_realized(cls, size)
}

@_cdecl("_os_object_dealloc")
public func _os_object_dealloc(_ object: UnsafeMutableRawPointer?) {
    guard let object else { return }
    let removed = objectsLock.withLock { allocatedObjects.remove(UInt(bitPattern: object)) != nil }
    if !removed { clientBug("_os_object_dealloc", "object was not made by _os_object_alloc") }
    free(object)
}

@_cdecl("_os_object_retain_internal_n")
public func _os_object_retain_internal_n(_ object: UnsafeMutableRawPointer?, _ n: UInt16) -> UnsafeMutableRawPointer? {
    guard let object else { return nil }
    guard isAllocated(object) else {
        for _ in 0..<n { dispatch_retain(object) }
        return object
    }
    if addCount(object, refOffset, Int32(n)) <= Int32(n) - 1 {
        clientBug("_os_object_retain_internal", "resurrection of an object")
    }
    return object
}

@_cdecl("_os_object_retain_internal")
public func _os_object_retain_internal(_ object: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    _os_object_retain_internal_n(object, 1)
}

@_cdecl("_os_object_release_internal_n")
public func _os_object_release_internal_n(_ object: UnsafeMutableRawPointer?, _ n: UInt16) {
    guard let object else { return }
    guard isAllocated(object) else {
        for _ in 0..<n { dispatch_release(object) }
        return
    }
    let now = addCount(object, refOffset, -Int32(n))
    if now >= 0 { return }
    if now < -1 { clientBug("_os_object_release_internal", "over-release of an object") }
    if !callHook(object, slot: 1) { _os_object_dealloc(object) }
}

@_cdecl("_os_object_release_internal")
public func _os_object_release_internal(_ object: UnsafeMutableRawPointer?) {
    _os_object_release_internal_n(object, 1)
}

@_cdecl("_os_object_retain")
public func _os_object_retain(_ object: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let object else { return nil }
    guard isAllocated(object) else {
        dispatch_retain(object)
        return object
    }
    if addCount(object, xrefOffset, 1) <= 0 { clientBug("_os_object_retain", "resurrection of an object") }
    return object
}

/// _os_object_retain that may bring back an object whose external count reached -1 (its
/// internal reference is taken again).
@_cdecl("_os_object_retain_with_resurrect")
public func _os_object_retain_with_resurrect(_ object: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let object else { return nil }
    guard isAllocated(object) else {
        dispatch_retain(object)
        return object
    }
    let now = addCount(object, xrefOffset, 1)
    if now < 0 { clientBug("_os_object_retain_with_resurrect", "over-release of an object") }
    if now == 0 { _ = _os_object_retain_internal(object) }
    return object
}

@_cdecl("_os_object_release")
public func _os_object_release(_ object: UnsafeMutableRawPointer?) {
    guard let object else { return }
    guard isAllocated(object) else {
        dispatch_release(object)
        return
    }
    let now = addCount(object, xrefOffset, -1)
    if now >= 0 { return }
    if now < -1 { clientBug("_os_object_release", "over-release of an object") }
    if !callHook(object, slot: 0) { _os_object_release_internal(object) }
}
