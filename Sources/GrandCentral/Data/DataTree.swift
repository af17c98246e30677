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

    // MARK: Joining

    /// Both non-empty and owned; returns one count.
    static func join(owned a: Unmanaged<DataObject>, owned b: Unmanaged<DataObject>) -> Unmanaged<DataObject> {
        let ha = a.height, hb = b.height
        if ha > hb + 1 { return joinRight(owned: a, owned: b, hb) }
        if hb > ha + 1 { return joinLeft(owned: a, owned: b, ha) }
        return composite(a, b)
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
        guard let left, let right else { return height == 0 && (size > 0 || self === DataObject.empty) }
        return left._withUnsafeGuaranteedRef { l in
            right._withUnsafeGuaranteedRef { r in
                size == l.size + r.size && height == max(l.height, r.height) + 1 &&
                    abs(l.height - r.height) <= 1 && l.isBalancedTree() && r.isBalancedTree()
            }
        }
    }
}
