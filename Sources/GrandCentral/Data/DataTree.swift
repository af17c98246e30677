// Concat and subrange on data object trees (DataObject.swift): the persistent AVL join
// ("Just Join for Parallel Ordered Sets", Blelloch, Ferizovic and Sun, 2016) and the cut
// built on it. Neither changes a node: they build new composites over shared subtrees.
//
// join(a, b) walks down the taller tree's inner spine to a subtree within one level of the
// shorter tree's height, puts the two side by side there and rebuilds the path, rotating
// where a level grew by two: O(|height(a) − height(b)| + 1) new nodes. A cut keeps the
// pieces of the tree on either side of two paths and joins them back up; the joins'
// heights telescope, so it builds O(log n) nodes.
//
// Appending a leaf or run to a tree whose last run has room merges it into that run
// instead (a path copy down the right spine; heights do not change), and prepending
// likewise at the left; so a buffer built piece by piece is a tree of full runs.
//
// Rejected: rebuilding a balanced tree from the leaf list (O(n) per call), and leaving trees
// unbalanced (a buffer built by appending would become a list, and apply's and
// copy_region's walks O(n) deep).
//
// Ownership: every function here takes and returns counted references (`externalRefs`,
// see DataObject.swift). Arguments named `owned` are consumed; `borrowed` ones are not.

extension DataObject {
    /// `a` followed by `b`, sharing both. Borrowed arguments; returns one count.
    static func concat(_ a: Unmanaged<DataObject>, _ b: Unmanaged<DataObject>) -> Unmanaged<DataObject> {
        if a.size == 0 { b.retainData(); return b }
        if b.size == 0 { a.retainData(); return a }
        a.retainData()
        b.retainData()
        return join(owned: a, owned: b)
    }

    /// `length` bytes of `data` from `offset`, clamped to its end; shares its regions.
    /// Borrowed argument; returns one count.
    static func subrange(_ data: Unmanaged<DataObject>, offset: Int, length: Int) -> Unmanaged<DataObject> {
        let size = data.size
        if offset >= size || length == 0 { return .passUnretained(empty) }
        return cut(data, offset: offset, length: min(length, size - offset))
    }

    // MARK: Cutting

    /// Bytes `offset..<offset+length` of `node` (borrowed; 0 < length, within bounds).
    private static func cut(_ node: Unmanaged<DataObject>, offset: Int, length: Int) -> Unmanaged<DataObject> {
        node._withUnsafeGuaranteedRef { n -> Unmanaged<DataObject> in
            if offset == 0 && length == n.size { node.retainData(); return node }
            if let entries = n.entries { return cutRun(entries, n.leafCount, offset: offset, length: length) }
            guard let left = n.left, let right = n.right else {
                return piece(of: n, offset: offset, length: length)
            }
            let leftSize = left.size
            if offset + length <= leftSize { return cut(left, offset: offset, length: length) }
            if offset >= leftSize { return cut(right, offset: offset - leftSize, length: length) }
            let head = cut(left, offset: offset, length: leftSize - offset)
            let tail = cut(right, offset: 0, length: offset + length - leftSize)
            return join(owned: head, owned: tail)
        }
    }

    /// Bytes `offset..<offset+length` of a run's entries: the entries it overlaps, the
    /// first and last cut to pieces where the range starts or ends inside them.
    private static func cutRun(_ entries: UnsafeMutablePointer<RegionEntry>, _ count: Int,
                               offset: Int, length: Int) -> Unmanaged<DataObject> {
        var first = 0, start = 0
        while start + entries[first].size <= offset { start += entries[first].size; first += 1 }
        var last = first, end = start + entries[first].size
        while end < offset + length { last += 1; end += entries[last].size }
        return run(count: last - first + 1) { destination in
            var position = start
            for k in first...last {
                let entry = entries[k]
                let lo = max(offset, position), hi = min(offset + length, position + entry.size)
                if lo == position && hi == position + entry.size {
                    entry.leaf.retainData()
                    (destination + (k - first)).initialize(to: entry)
                } else {
                    let part = entry.leaf._withUnsafeGuaranteedRef { piece(of: $0, offset: lo - position, length: hi - lo) }
                    (destination + (k - first)).initialize(to: RegionEntry(leaf: part, bytes: entry.bytes + (lo - position),
                                                                           size: hi - lo))
                }
                position += entry.size
            }
            return length
        }
    }

    // MARK: Joining

    /// Both non-empty and owned; returns one count.
    static func join(owned a: Unmanaged<DataObject>, owned b: Unmanaged<DataObject>) -> Unmanaged<DataObject> {
        let ha = a.height, hb = b.height
        if hb == 0 && edge(a, right: true).leafCount + b.leafCount <= runCapacity {
            return intoEdge(owned: a, owned: b, right: true)
        }
        if ha == 0 && edge(b, right: false).leafCount + a.leafCount <= runCapacity {
            return intoEdge(owned: b, owned: a, right: false)
        }
        if ha > hb + 1 { return joinRight(owned: a, owned: b, hb) }
        if hb > ha + 1 { return joinLeft(owned: a, owned: b, ha) }
        return composite(a, b)
    }

    /// The last (`right`) or first leaf or run of `node` (borrowed).
    private static func edge(_ node: Unmanaged<DataObject>, right: Bool) -> Unmanaged<DataObject> {
        var node = node
        while let next = node._withUnsafeGuaranteedRef({ right ? $0.right : $0.left }) { node = next }
        return node
    }

    /// `tree` with `flat` (a leaf or run) merged into its last (`right`) or first leaf or
    /// run, which has room for it; both owned. Copies the path; heights do not change.
    private static func intoEdge(owned tree: Unmanaged<DataObject>, owned flat: Unmanaged<DataObject>,
                                 right: Bool) -> Unmanaged<DataObject> {
        if tree.height == 0 {
            let (first, second) = right ? (tree, flat) : (flat, tree)
            let merged = run(count: first.leafCount + second.leafCount) { destination in
                let n = copyEntries(of: first, to: destination)
                _ = copyEntries(of: second, to: destination + n)
                return first.size + second.size
            }
            tree.releaseData()
            flat.releaseData()
            return merged
        }
        let (l, r) = expose(owned: tree)
        return right ? composite(l, intoEdge(owned: r, owned: flat, right: true))
                     : composite(intoEdge(owned: l, owned: flat, right: false), r)
    }

    /// The children of composite `node`, one count each; consumes `node`'s count.
    @inline(__always)
    private static func expose(owned node: Unmanaged<DataObject>) -> (Unmanaged<DataObject>, Unmanaged<DataObject>) {
        let (l, r) = node._withUnsafeGuaranteedRef { ($0.left!, $0.right!) }
        l.retainData()
        r.retainData()
        node.releaseData()
        return (l, r)
    }

    /// height(a) > height(b) + 1: b goes down a's right spine.
    private static func joinRight(owned a: Unmanaged<DataObject>, owned b: Unmanaged<DataObject>,
                                  _ hb: Int) -> Unmanaged<DataObject> {
        let (l, c) = expose(owned: a)
        let hl = l.height, hc = c.height
        if hc <= hb + 1 {
            // (c, b) is balanced; it is one level too tall beside l only when c is l's
            // height + 1, and then a double rotation rebalances: ((l, c.l), (c.r, b)).
            if max(hc, hb) + 1 <= hl + 1 { return composite(l, composite(c, b)) }
            let (c1, c2) = expose(owned: c)
            return composite(composite(l, c1), composite(c2, b))
        }
        let t = joinRight(owned: c, owned: b, hb)
        if t.height <= hl + 1 { return composite(l, t) }
        let (t1, t2) = expose(owned: t)
        return composite(composite(l, t1), t2)
    }

    /// height(b) > height(a) + 1: a goes down b's left spine (the mirror of joinRight).
    private static func joinLeft(owned a: Unmanaged<DataObject>, owned b: Unmanaged<DataObject>,
                                 _ ha: Int) -> Unmanaged<DataObject> {
        let (c, r) = expose(owned: b)
        let hr = r.height, hc = c.height
        if hc <= ha + 1 {
            if max(hc, ha) + 1 <= hr + 1 { return composite(composite(a, c), r) }
            let (c1, c2) = expose(owned: c)
            return composite(composite(a, c1), composite(c2, r))
        }
        let t = joinLeft(owned: a, owned: c, ha)
        if t.height <= hr + 1 { return composite(t, r) }
        let (t1, t2) = expose(owned: t)
        return composite(t1, composite(t2, r))
    }

    // MARK: Checking (tests)

    /// True when every composite is balanced and its size and height are its children's.
    func isBalancedTree() -> Bool {
        if let entries {
            var total = 0
            for i in 0..<leafCount { total += entries[i].size; if !entries[i].leaf._withUnsafeGuaranteedRef({ $0.isLeaf }) { return false } }
            return height == 0 && total == size && leafCount >= 2 && leafCount <= DataObject.runCapacity
        }
        guard let left, let right else { return height == 0 && (size > 0 || self === DataObject.empty) }
        return left._withUnsafeGuaranteedRef { l in
            right._withUnsafeGuaranteedRef { r in
                size == l.size + r.size && height == max(l.height, r.height) + 1 &&
                    abs(l.height - r.height) <= 1 && l.isBalancedTree() && r.isBalancedTree()
            }
        }
    }
}
