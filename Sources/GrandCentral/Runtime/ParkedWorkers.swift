import CGrandCentral
import Synchronization

/// Where idle workers sleep: a counting semaphore that wakes the most recently parked
/// worker first (a stack), where a futex semaphore (`FutexSemaphore`) wakes the one parked
/// longest.
///
/// Why LIFO. A pool that wakes its oldest sleeper rotates a trickle of work through every
/// parked worker, so none of them ever stays parked for `ThreadPool.idleTimeout` and a pool
/// sized by a burst never shrinks back: after a burst that started 10 workers, a 1 ms
/// timer's handler changed threads on 3,999 of 4,000 fires and 13 threads were alive 8 s
/// later. Woken newest first, one warm thread serves the trickle and the rest retire (5
/// threads left). The handler's lateness did not move either way (p50 8.6-10.9 µs, p99
/// 41-68 µs, 3 alternating runs each). (Go's idle Ms and Java's ForkJoinPool park the same
/// way.)
///
/// Contract: the same as a counting semaphore's, which is what `ThreadPool`'s `idle`
/// protocol relies on (a producer that took a unit of `idle` signals once; a worker that
/// could not take its unit back waits once). A `signal` either hands its unit to the
/// parked worker on top of the stack, unlinking it and setting its `woken` word, or, with
/// nobody parked, leaves it in `tokens` for the next `wait`. A `wait` that times out
/// unlinks itself and returns false, unless a signal unlinked it first: then that signal's
/// unit is its own, and it waits for the word (already set, or about to be).
///
/// Who touches what: `tokens`, `top` and every slot's `next`/`prev`, only under `lock`. A
/// slot's `woken` is the futex word: reset by its worker under the lock as it links
/// itself, set (release) under the lock by the signal that unlinks it (so, under the lock,
/// a waiting worker's slot is linked exactly while its word is 0), and read (acquire) by
/// its worker outside the lock, so the signaller's writes before `signal` are visible to
/// the woken worker. The signal's futex wake comes after the unlock: by then the worker may
/// have seen `woken` and moved on (even parked again, or exited after a later timeout, its
/// slot freed). A private futex wake only names an address; the worst it does is wake that
/// address's next sleeper early, and every sleeper here re-reads its word and sleeps again.
final class ParkedWorkers: @unchecked Sendable {
    /// One worker's place in the stack. Allocated by its `Worker`, freed with it (a worker
    /// exits only after a timed-out `wait` unlinked its slot).
    struct Slot {
        /// The futex word: 0 parked (and so linked, while its worker is in `wait`), 1 a
        /// signal unlinked this slot (its unit is ours).
        var woken: UInt32 = 0
        /// Toward older parked workers / toward newer ones.
        var next: UnsafeMutablePointer<Slot>?
        var prev: UnsafeMutablePointer<Slot>?

        static func allocate() -> UnsafeMutablePointer<Slot> {
            let slot = UnsafeMutablePointer<Slot>.allocate(capacity: 1)
            slot.initialize(to: Slot())
            return slot
        }

        static func word(_ slot: UnsafeMutablePointer<Slot>) -> UnsafeMutablePointer<UInt32> {
            (UnsafeMutableRawPointer(slot) + MemoryLayout<Slot>.offset(of: \.woken)!)
                .assumingMemoryBound(to: UInt32.self)
        }
    }

    /// Our own spin lock, held for a few loads and stores (never across a system call).
    private let lock = SpinLock()
    /// Signals that found nobody parked and wait for the next `wait`.
    private var tokens = 0
    /// The most recently parked worker's slot, or nil.
    private var top: UnsafeMutablePointer<Slot>?

    /// Gives one unit: to the most recently parked worker (woken by its own futex word), or
    /// to the next `wait` if nobody is parked.
    func signal() {
        lock.lock()
        guard let slot = top else {
            tokens += 1
            lock.unlock()
            return
        }
        unlink(slot)
        gc_word_store(Slot.word(slot), 1)
        lock.unlock()
        _ = gc_futex_wake(Slot.word(slot), 1)
    }

    /// Takes one unit, parking `slot` on top of the stack until a signal hands it one.
    /// Returns false on timeout (`timeoutNanoseconds < 0`: never), with no unit taken.
    func wait(_ slot: UnsafeMutablePointer<Slot>, timeoutNanoseconds: Int64) -> Bool {
        let word = Slot.word(slot)
        lock.lock()
        if tokens > 0 {
            tokens -= 1
            lock.unlock()
            return true
        }
        gc_word_store(word, 0)
        slot.pointee.next = top
        slot.pointee.prev = nil
        top?.pointee.prev = slot
        top = slot
        lock.unlock()

        let start = timeoutNanoseconds > 0 ? gc_uptime_ns() : 0
        var forever = timeoutNanoseconds < 0
        while true {
            if gc_word_load(word) == 1 { return true }
            var remaining: Int64 = -1
            if !forever {
                remaining = timeoutNanoseconds - Int64(gc_uptime_ns() &- start)
                if remaining <= 0 {
                    lock.lock()
                    if gc_word_load(word) == 0 {  // no signal unlinked us: leave
                        unlink(slot)
                        lock.unlock()
                        return false
                    }
                    lock.unlock()
                    forever = true  // a signal unlinked us: its unit is ours, its wake coming
                    continue
                }
            }
            _ = gc_futex_wait(word, 0, remaining)
        }
    }

    /// Under `lock`.
    private func unlink(_ slot: UnsafeMutablePointer<Slot>) {
        let next = slot.pointee.next, prev = slot.pointee.prev
        next?.pointee.prev = prev
        if let prev { prev.pointee.next = next } else { top = next }
        slot.pointee.next = nil
        slot.pointee.prev = nil
    }

    /// How many workers are parked (a walk under the lock; for tests).
    var parkedCount: Int {
        lock.withLock {
            var n = 0
            var slot = top
            while let s = slot { n += 1; slot = s.pointee.next }
            return n
        }
    }

    /// The child of a fork: no parked worker of the parent exists there.
    func resetInForkChild() {
        lock.resetInForkChild()
        tokens = 0
        top = nil
    }
}
