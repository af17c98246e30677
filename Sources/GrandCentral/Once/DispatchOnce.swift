import CGrandCentral

/// `dispatch_once_f`'s slow path. The header's inline fast path returns when the
/// predicate (a `long`) is `~0`; this runs only before that.
///
/// Predicate values: 0 not started; 1 running; 2 running with waiters; ~0 done. Waiters
/// sleep on the predicate's low 32 bits (a futex word; little-endian) while it reads 2.
/// The initializer's thread stores ~0 (release: its writes are visible to everyone who
/// sees done) and wakes all waiters if any announced themselves.
enum DispatchOnce {
    static let done = UInt(bitPattern: -1)

    static func perform(_ predicate: UnsafeMutablePointer<Int>, _ context: UnsafeMutableRawPointer?,
                        _ function: DispatchFunction) {
        let word = UnsafeMutableRawPointer(predicate).assumingMemoryBound(to: UInt.self)
        var expected: UInt = 0
        if gc_uword_cas(word, &expected, 1) {
            function(context)
            let old = gc_uword_exchange(word, done)
            if old == 2 {
                gc_futex_wake(UnsafeMutableRawPointer(predicate).assumingMemoryBound(to: UInt32.self), Int32.max)
            }
            return
        }
        if expected == done { return }
        // Someone else runs the initializer: announce ourselves and sleep until done.
        let low = UnsafeMutableRawPointer(predicate).assumingMemoryBound(to: UInt32.self)
        BlockingRegion.enter()
        defer { BlockingRegion.leave() }
        while true {
            var current = gc_uword_load(word)
            if current == done { return }
            if current == 1 {
                if !gc_uword_cas(word, &current, 2) { continue }
            }
            _ = gc_futex_wait(low, 2, -1)
        }
    }
}
