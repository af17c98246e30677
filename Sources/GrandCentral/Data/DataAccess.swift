import Glibc

// Reading a data object: visiting its regions in order (apply), finding the region that
// holds a byte (copy_region), one contiguous copy (map) and copying a range out.
//
// The walks descend the tree by hand with borrowed (unmanaged) references, so reading
// costs no reference counting; the caller's own reference keeps the whole tree alive.
//
// Apply on a composite of many leaves builds, during its first complete walk, a *region
// index*: the leaves in order with their bytes and sizes, in one array that later applies
// scan front to back (published once, like create_map's copy). Even with runs (a node per
// ~16 regions), a walk follows pointers to nodes scattered by allocation order: measured
// here at ~20 ns per region warm and 35–150 ns cold for 20,000 regions, against ~10–16 ns
// for libdispatch's record array; the scan costs ~4 ns and touches no node. The index
// costs 24 bytes per region, once per data object applied to. Rejected: a fully B-tree
// shaped rope (runs of children at every level, not just the bottom), which would give the
// walk the same locality without the copy but makes join and cut much more intricate.

/// One entry of a region index.
struct RegionEntry {
    let leaf: Unmanaged<DataObject>
    let bytes: UnsafeRawPointer
    let size: Int
}

extension DataObject {
    /// Composites with fewer leaves are walked every time (their walk stays in cache).
    static var regionIndexMinimumLeaves: Int { 16 }

    /// Calls `body(region, offset, bytes, size)` for each leaf in order, stopping when it
    /// returns false. The region is borrowed for the call. Returns false if `body` did.
    @inline(__always)
    func forEachRegion(_ body: (Unmanaged<DataObject>, Int, UnsafeRawPointer, Int) -> Bool) -> Bool {
        if size == 0 { return true }
        if let bytes { return body(Unmanaged.passUnretained(self), 0, bytes, size) }
        // Acquiring: the entries were written before the index was published (releasing).
        let index = entries ?? regionIndex.load(ordering: .acquiring)?.assumingMemoryBound(to: RegionEntry.self)
        if let entries = index {
            var offset = 0
            for i in 0..<leafCount {
                let entry = entries[i]
                if !body(entry.leaf, offset, entry.bytes, entry.size) { return false }
                offset += entry.size
            }
            return true
        }
        return walk(body)
    }

    /// The tree walk behind forEachRegion; records a region index when it completes.
    private func walk(_ body: (Unmanaged<DataObject>, Int, UnsafeRawPointer, Int) -> Bool) -> Bool {
        var index: UnsafeMutablePointer<RegionEntry>? = nil
        if leafCount >= DataObject.regionIndexMinimumLeaves {
            index = malloc(leafCount * MemoryLayout<RegionEntry>.stride)?.assumingMemoryBound(to: RegionEntry.self)
        }
        let completed = withUnsafeTemporaryAllocation(of: Unmanaged<DataObject>.self, capacity: height + 1) { stack in
            var depth = 1
            stack[0] = Unmanaged.passUnretained(self)
            var offset = 0
            var visited = 0
            while depth > 0 {
                depth -= 1
                var node = stack[depth]
                // Go down the left spine, stacking right children for later.
                while let (l, r) = node._withUnsafeGuaranteedRef({ n in n.left.map { ($0, n.right!) } }) {
                    stack[depth] = r
                    depth += 1
                    node = l
                }
                let (b, s, run, runCount) = node._withUnsafeGuaranteedRef { ($0.bytes, $0.size, $0.entries, $0.leafCount) }
                if let b {
                    index?.advanced(by: visited).initialize(to: RegionEntry(leaf: node, bytes: b, size: s))
                    visited += 1
                    if !body(node, offset, b, s) { return false }
                    offset += s
                } else if let run {
                    for i in 0..<runCount {
                        let entry = run[i]
                        index?.advanced(by: visited).initialize(to: entry)
                        visited += 1
                        if !body(entry.leaf, offset, entry.bytes, entry.size) { return false }
                        offset += entry.size
                    }
                }
            }
            return true
        }
        if let index {
            if !completed || !regionIndex.compareExchange(expected: nil, desired: UnsafeMutableRawPointer(index),
                                                          ordering: .acquiringAndReleasing).exchanged {
                free(index)
            }
        }
        return completed
    }

    /// The leaf that holds byte `location` (< size) and the offset where it starts.
    /// Borrowed result.
    func region(at location: Int) -> (region: Unmanaged<DataObject>, offset: Int) {
        var node = Unmanaged.passUnretained(self)
        var start = 0
        while let (l, r) = node._withUnsafeGuaranteedRef({ n in n.left.map { ($0, n.right!) } }) {
            let leftSize = l.size
            if location - start < leftSize { node = l } else { start += leftSize; node = r }
        }
        if let entries = node._withUnsafeGuaranteedRef({ $0.entries }) {
            var i = 0
            while location - start >= entries[i].size { start += entries[i].size; i += 1 }
            return (entries[i].leaf, start)
        }
        return (node, start)
    }

    /// A data object of one region with the same bytes: `self` for a leaf, else the copy
    /// made the first time (and kept, so the tree is flattened once). Returns one count.
    func contiguous() -> Unmanaged<DataObject> {
        if size == 0 { return .passUnretained(DataObject.empty) }
        if isLeaf {
            let me = Unmanaged.passUnretained(self)
            me.retainData()
            return me
        }
        // Acquiring: the copy's bytes were written before it was published (releasing).
        if let flat = flattened.load(ordering: .acquiring) {
            let cached = Unmanaged<DataObject>.fromOpaque(flat)
            cached.retainData()
            return cached
        }
        guard let buffer = malloc(size) else { outOfMemory() }
        copyBytes(to: buffer, from: 0, count: size)
        let copy = DataObject.make(bytes: buffer, size: size, destructor: .free)
        let (won, current) = flattened.compareExchange(expected: nil, desired: copy.toOpaque(),
                                                       ordering: .acquiringAndReleasing)
        if won {
            copy.retainData()   // one count for the cache, one for the caller
            return copy
        }
        // Another thread flattened first: use its copy, drop ours.
        copy.releaseData()
        let cached = Unmanaged<DataObject>.fromOpaque(current!)
        cached.retainData()
        return cached
    }

    /// Copies bytes `from..<from+count` (within bounds) to `destination`.
    func copyBytes(to destination: UnsafeMutableRawPointer, from: Int, count: Int) {
        if count == 0 { return }
        if let bytes { memcpy(destination, bytes + from, count); return }
        if let flat = flattened.load(ordering: .acquiring) {
            _ = Unmanaged<DataObject>.fromOpaque(flat)._withUnsafeGuaranteedRef {
                memcpy(destination, $0.bytes! + from, count)
            }
            return
        }
        Self.copy(Unmanaged.passUnretained(self), start: 0, to: destination, from: from, end: from + count)
    }

    /// Copies the part of `node` (which starts at `start`) that overlaps `from..<end`;
    /// visits only the subtrees that overlap, so O(log n + regions copied).
    private static func copy(_ node: Unmanaged<DataObject>, start: Int, to destination: UnsafeMutableRawPointer,
                             from: Int, end: Int) {
        node._withUnsafeGuaranteedRef { n in
            if let bytes = n.bytes {
                let lo = max(start, from), hi = min(start + n.size, end)
                if lo < hi { memcpy(destination + (lo - from), bytes + (lo - start), hi - lo) }
                return
            }
            if let entries = n.entries {
                var position = start
                for i in 0..<n.leafCount where position < end {
                    let entry = entries[i]
                    let lo = max(position, from), hi = min(position + entry.size, end)
                    if lo < hi { memcpy(destination + (lo - from), entry.bytes + (lo - position), hi - lo) }
                    position += entry.size
                }
                return
            }
            let l = n.left!, r = n.right!
            let middle = start + l.size
            if from < middle { copy(l, start: start, to: destination, from: from, end: end) }
            if end > middle { copy(r, start: middle, to: destination, from: from, end: end) }
        }
    }
}
