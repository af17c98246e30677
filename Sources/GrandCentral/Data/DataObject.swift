import CGrandCentral
import Glibc
import Synchronization

// A data object is a node of an immutable, balanced binary tree of byte regions (a rope):
//
//   - a *leaf* stands for `size` contiguous bytes at `bytes`. A leaf either owns its region
//     (`owner == nil`: it runs the region's destructor when it dies) or is a piece of
//     another leaf's region (`owner` is that region-owning leaf, which the piece keeps alive);
//   - a *run* stands for up to `DataObject.runCapacity` leaves side by side, held in one
//     array of (leaf, bytes, size) entries (one count per leaf). Appending small pieces
//     fills the run at the end of the tree instead of adding a composite per piece, so
//     apply and copy_region scan arrays and touch one node per run, not two per region;
//   - a *composite* stands for `left`'s bytes followed by `right`'s. Its `height` is one
//     more than its taller child (leaves and runs have height 0), and the children's
//     heights differ by at most one (an AVL tree), so a tree of n leaves is at most
//     ~1.44·log2(n) deep.
//
// Concat joins two trees along the taller one's spine (DataTree.swift) and subrange cuts
// one along two paths; both build O(log n) new composites and share every other node, so no
// byte is copied. Apply walks the leaves in order and hands each leaf itself to the
// applier: the region object is exactly that region and costs nothing to produce.
//
// Rejected: libdispatch's flat record array (each concat copies both arrays: building a
// buffer piece by piece is quadratic), and subrange as an (object, offset, length) view
// (O(1), but it keeps every region of the original alive and delays their destructors).
//
// Invariants, and why reference counting is enough:
//   - every stored field is written in `init` and never again, except the two caches,
//     `flattened` and `regionIndex`, which each go once from nil to their final value
//     (compare-and-exchange, published with release, read with acquire); so any thread may
//     read a node it holds a reference to, without locks (the client's context and
//     finalizer fields of DispatchObject are the client's to synchronize, as for any object);
//   - a node is never empty, except the global `DataObject.empty`, which appears in no tree
//     (empty pieces vanish on concat and subrange);
//   - every reference to a data object — a C handle, a parent's `left`/`right`, a run's
//     entry, a piece's `owner`, a composite's `flattened`, a Swift `DispatchData` — is one count in
//     `externalRefs` (DispatchObject). The object holds one ARC retain while that count is
//     above zero (taken at creation, dropped by the release that reaches zero). So a node
//     inside a tree always has a count of at least one, and a region handed to an applier
//     may be retained by it with plain dispatch_retain;
//   - a node's deinit releases what it references; because the graph is acyclic and trees
//     are balanced, that recursion is as deep as the tree, and a region's destructor runs
//     exactly once, when its owning leaf dies, i.e. when the last object sharing it is gone.

/// How a region's bytes are given back when the last data object sharing them goes away.
enum DataDestructor {
    /// The bytes belong to someone else (or the region is empty).
    case none
    /// free(3), on the releasing thread (as libdispatch does).
    case free
    /// munmap(2) of exactly the region, on the releasing thread.
    case munmap
    /// `function(context)`, submitted to `queue` (the default root queue when nil).
    case function(DispatchFunction, UnsafeMutableRawPointer?, DispatchQueue?)
}

/// One node of a data object tree; see above. `kind == .data`. The fields apply's walk
/// reads (`left`, `right`, `bytes`, `size`) come first, to share a cache line.
final class DataObject: DispatchObject, @unchecked Sendable {
    /// Composite: the children (one count each). Leaf: nil.
    let left: Unmanaged<DataObject>?
    let right: Unmanaged<DataObject>?
    /// Leaf: the first byte. Otherwise nil.
    let bytes: UnsafeRawPointer?
    /// Run: its `leafCount` entries (malloc'ed; one count per leaf). Otherwise nil.
    let entries: UnsafeMutablePointer<RegionEntry>?
    /// Bytes this object represents. Never 0 except for `empty`.
    let size: Int
    /// 0 for a leaf or a run, else 1 + the taller child's height.
    let height: Int
    /// Leaves below (1 for a leaf, the entry count for a run).
    let leafCount: Int
    /// Leaf that is a piece of another leaf's region: the region-owning leaf (one count).
    /// A leaf without an owner owns the region `bytes..<bytes+size`.
    let owner: Unmanaged<DataObject>?
    /// Region-owning leaf: how to give the region back. Otherwise `.none`.
    let destructor: DataDestructor
    /// Composite or run: the one-region copy `create_map` made (one count), or nil. Written once.
    let flattened = Atomic<UnsafeMutableRawPointer?>(nil)
    /// Composite: its leaves in order, a malloc'ed array of `RegionEntry` (DataAccess.swift)
    /// that apply builds on its first complete walk, or nil. Written once; borrowed leaf references
    /// (this node keeps its whole tree alive).
    let regionIndex = Atomic<UnsafeMutableRawPointer?>(nil)

    /// The data object of size zero; global, so retain and release do nothing.
    static let empty = DataObject(emptyGlobal: ())

    private init(emptyGlobal: Void) {
        left = nil; right = nil; bytes = nil; entries = nil; size = 0; height = 0; leafCount = 0
        owner = nil; destructor = .none
        super.init(kind: .data, isGlobal: true)
    }

    /// A leaf that owns the region `bytes..<bytes+size` (size > 0).
    private init(region: UnsafeRawPointer, size: Int, destructor: DataDestructor) {
        left = nil; right = nil; bytes = region; entries = nil; self.size = size; height = 0; leafCount = 1
        owner = nil; self.destructor = destructor
        super.init(kind: .data)
    }

    /// A leaf for `size` bytes at `bytes`, a piece of `owner`'s region; takes `owner`'s count.
    private init(piece bytes: UnsafeRawPointer, size: Int, owner: Unmanaged<DataObject>) {
        left = nil; right = nil; self.bytes = bytes; entries = nil; self.size = size; height = 0; leafCount = 1
        self.owner = owner; destructor = .none
        super.init(kind: .data)
    }

    /// A composite of two non-empty trees; takes one count of each.
    private init(left: Unmanaged<DataObject>, right: Unmanaged<DataObject>, size: Int, height: Int, leafCount: Int) {
        self.left = left; self.right = right; bytes = nil; entries = nil; self.size = size; self.height = height
        self.leafCount = leafCount; owner = nil; destructor = .none
        super.init(kind: .data)
    }

    /// A run over `count` entries (2 or more); takes the array and the entries' counts.
    private init(entries: UnsafeMutablePointer<RegionEntry>, count: Int, size: Int) {
        left = nil; right = nil; bytes = nil; self.entries = entries; self.size = size; height = 0
        leafCount = count; owner = nil; destructor = .none
        super.init(kind: .data)
    }

    deinit {
        if let entries {
            for i in 0..<leafCount { entries[i].leaf.releaseData() }
            free(entries)
        }
        if let left { left.releaseData() }
        if let right { right.releaseData() }
        if let owner { owner.releaseData() }
        if let flat = flattened.load(ordering: .acquiring) {
            Unmanaged<DataObject>.fromOpaque(flat).releaseData()
        }
        if let index = regionIndex.load(ordering: .acquiring) { free(index) }
        giveBackRegion()
    }

    private func giveBackRegion() {
        Self.giveBack(bytes, size, destructor)
    }

    /// Runs a region's destructor.
    private static func giveBack(_ start: UnsafeRawPointer?, _ size: Int, _ destructor: DataDestructor) {
        switch destructor {
        case .none: break
        case .free: Glibc.free(UnsafeMutableRawPointer(mutating: start))
        case .munmap: if size > 0 { _ = Glibc.munmap(UnsafeMutableRawPointer(mutating: start), size) }
        case .function(let function, let context, let queue):
            (queue ?? DispatchQueue.defaultRootQueue).enqueue(function, context)
        }
    }

    /// `data[0x…] = { refcount, size, regions }`: regions, the contiguous byte regions
    /// `dispatch_data_apply` would visit (the leaves).
    override func debugDescription() -> String {
        describe([("refcount", debugRefcount), ("size", "\(size)"), ("regions", "\(leafCount)")])
    }

    // MARK: Making data objects (each returns one count, which the caller owns)

    /// A data object over `size` bytes at `buffer`, given back by `destructor`. An empty
    /// buffer yields `empty`, and the destructor runs at once.
    static func make(bytes buffer: UnsafeRawPointer?, size: Int, destructor: DataDestructor) -> Unmanaged<DataObject> {
        guard let buffer, size > 0 else {
            giveBack(buffer, 0, destructor)
            return .passUnretained(empty)
        }
        return .passRetained(DataObject(region: buffer, size: size, destructor: destructor))
    }

    /// A data object holding a copy of `size` bytes at `buffer` (DISPATCH_DATA_DESTRUCTOR_DEFAULT).
    static func makeCopy(bytes buffer: UnsafeRawPointer?, size: Int) -> Unmanaged<DataObject> {
        guard let buffer, size > 0 else { return .passUnretained(empty) }
        guard let copy = malloc(size) else { outOfMemory() }
        memcpy(copy, buffer, size)
        return .passRetained(DataObject(region: copy, size: size, destructor: .free))
    }

    /// A piece of leaf `leaf` (borrowed): `length` bytes from `offset`, sharing its region.
    static func piece(of leaf: DataObject, offset: Int, length: Int) -> Unmanaged<DataObject> {
        let regionOwner = leaf.owner ?? Unmanaged.passUnretained(leaf)
        regionOwner.retainData()
        return .passRetained(DataObject(piece: leaf.bytes! + offset, size: length, owner: regionOwner))
    }

    /// Most leaves a run holds.
    static var runCapacity: Int { 16 }

    @inline(__always) var isLeaf: Bool { bytes != nil }

    /// One run (or, for a single entry, the leaf itself) over `count` entries built by
    /// `fill`, which writes entries holding one count each and returns their total size.
    static func run(count: Int, _ fill: (UnsafeMutablePointer<RegionEntry>) -> Int) -> Unmanaged<DataObject> {
        guard let entries = malloc(count * MemoryLayout<RegionEntry>.stride)?.assumingMemoryBound(to: RegionEntry.self)
        else { outOfMemory() }
        let size = fill(entries)
        if count == 1 {
            let leaf = entries[0].leaf
            free(entries)
            return leaf
        }
        return .passRetained(DataObject(entries: entries, count: count, size: size))
    }

    /// Writes the entries of `node` (a leaf or a run, borrowed) at `destination`, each with
    /// a new count; returns how many.
    static func copyEntries(of node: Unmanaged<DataObject>, to destination: UnsafeMutablePointer<RegionEntry>) -> Int {
        node._withUnsafeGuaranteedRef { n in
            if let entries = n.entries {
                for i in 0..<n.leafCount {
                    entries[i].leaf.retainData()
                    (destination + i).initialize(to: entries[i])
                }
                return n.leafCount
            }
            node.retainData()
            destination.initialize(to: RegionEntry(leaf: node, bytes: n.bytes!, size: n.size))
            return 1
        }
    }

    /// A composite of `left` and `right` (both non-empty, heights within one); takes their counts.
    static func composite(_ left: Unmanaged<DataObject>, _ right: Unmanaged<DataObject>) -> Unmanaged<DataObject> {
        let (ls, lh, lc) = left._withUnsafeGuaranteedRef { ($0.size, $0.height, $0.leafCount) }
        let (rs, rh, rc) = right._withUnsafeGuaranteedRef { ($0.size, $0.height, $0.leafCount) }
        return .passRetained(DataObject(left: left, right: right, size: ls + rs, height: max(lh, rh) + 1,
                                        leafCount: lc + rc))
    }
}

@inline(never)
func outOfMemory() -> Never {
    gc_write_stderr("GrandCentral: dispatch_data: out of memory\n")
    abort()
}

// MARK: - Counting references

extension Unmanaged where Instance == DataObject {
    /// Adds a reference (one count in `externalRefs`).
    @inline(__always)
    func retainData() {
        _withUnsafeGuaranteedRef { $0.retainExternal("dispatch_retain") }
    }

    /// Drops a reference; the last one disposes of the object.
    @inline(__always)
    func releaseData() {
        _withUnsafeGuaranteedRef { $0.releaseExternal("dispatch_release") }
    }

    var size: Int { _withUnsafeGuaranteedRef { $0.size } }
    var height: Int { _withUnsafeGuaranteedRef { $0.height } }
    var leafCount: Int { _withUnsafeGuaranteedRef { $0.leafCount } }
}
