import CGrandCentral
import Synchronization

/// The root queues: one per QoS bucket, each in an overcommit and a non-overcommit
/// flavour, all served by the one thread pool. A worker takes work from the highest QoS
/// bucket that has any (overcommit before non-overcommit within a bucket).
///
/// Overcommit is accepted and reported, but both flavours share the pool's policy: keep
/// as many workers running as there are CPUs, and replace workers that block. libdispatch
/// instead gives overcommit queues a thread whenever none is idle, which is how it grows
/// hundreds of threads under load; we chose not to.
enum RootQueues {
    static let bucketCount = 6

    /// Index = bucket * 2 + (overcommit ? 1 : 0).
    static let all: [DispatchQueue] = {
        var queues: [DispatchQueue] = []
        let names = ["maintenance", "background", "utility", "default", "user-initiated", "user-interactive"]
        for bucket in 0..<bucketCount {
            for overcommit in [false, true] {
                var attributes = QueueAttributes.concurrent
                attributes.qos = QoSLevel.byBucket[bucket]
                let label = "com.apple.root.\(names[bucket])-qos" + (overcommit ? ".overcommit" : "")
                let queue = label.withCString {
                    DispatchQueue(role: .root, label: $0, attributes: attributes, target: nil)
                }
                queues.append(queue)
            }
        }
        return queues
    }()

    /// The pool scans in this order: highest QoS first, overcommit first. Unmanaged, so a
    /// scan costs no reference counting (the root queues live forever).
    nonisolated(unsafe) static let scanOrder: UnsafeMutableBufferPointer<Unmanaged<DispatchQueue>> = {
        let buffer = UnsafeMutableBufferPointer<Unmanaged<DispatchQueue>>.allocate(capacity: all.count)
        for (i, queue) in all.reversed().enumerated() { buffer[i] = Unmanaged.passUnretained(queue) }
        return buffer
    }()

    @inline(__always)
    static func queue(qos: QoSLevel, overcommit: Bool) -> DispatchQueue {
        all[qos.bucket * 2 + (overcommit ? 1 : 0)]
    }

    static let defaultQueue: DispatchQueue = queue(qos: .default, overcommit: false)

    /// `dispatch_get_global_queue`'s identifier: a QoS class or a legacy priority.
    static func queue(identifier: Int, flags: UInt) -> DispatchQueue? {
        let overcommit = flags & 0x2 != 0
        let qos: QoSLevel
        switch identifier {
        case 2: qos = .userInitiated                     // DISPATCH_QUEUE_PRIORITY_HIGH
        case 0: qos = .default                           // DISPATCH_QUEUE_PRIORITY_DEFAULT
        case -2: qos = .utility                          // DISPATCH_QUEUE_PRIORITY_LOW
        case Int(Int16.min): qos = .background           // DISPATCH_QUEUE_PRIORITY_BACKGROUND
        default:
            guard identifier >= 0, identifier <= Int(UInt32.max),
                  let q = QoSLevel(rawValue: UInt32(identifier)) else { return nil }
            qos = q
        }
        return queue(qos: qos, overcommit: overcommit)
    }
}

extension DispatchQueue {
    static var defaultRootQueue: DispatchQueue { RootQueues.defaultQueue }

    /// A root queue's consumer side: pops under `rootPopLock` (many workers consume).
    @inline(__always)
    final func popRoot() -> Continuation? {
        if items.isEmpty { return nil }
        if rootPopLock.exchange(true, ordering: .acquiring) { return popRootContended() }
        let node = items.pop()
        rootPopLock.store(false, ordering: .releasing)
        return node
    }

    @inline(never)
    final func popRootContended() -> Continuation? {
        var spins = 0
        while true {
            if items.isEmpty { return nil }
            if !rootPopLock.load(ordering: .relaxed) && !rootPopLock.exchange(true, ordering: .acquiring) {
                let node = items.pop()
                rootPopLock.store(false, ordering: .releasing)
                return node
            }
            spins += 1
            if spins > 16 { return nil }
            gc_cpu_relax()
        }
    }
}
