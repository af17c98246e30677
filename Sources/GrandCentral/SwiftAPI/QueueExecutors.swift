// Queues as Swift concurrency executors, spelled as Darwin's Dispatch spells them:
// `DispatchSerialQueue` is a `SerialExecutor` (an actor's `unownedExecutor` can be one, and
// `assumeIsolated` works on the queue), `DispatchConcurrentQueue` is a `TaskExecutor`
// (`Task(executorPreference:)` runs a task's jobs on it). Dispatch on Linux has neither.
//
// The classes exist in every build; the conformances only where `GRANDCENTRAL_EXECUTORS` is
// defined, which Package.swift does and CMake does not: they need `_Concurrency`, which loads
// libdispatch, and libgrandcentral.so must never load it (DESIGN.md, hard rule 1).
//
// A job is enqueued as an ordinary item on the queue and run there with
// `runSynchronously(on:)`, so it keeps the queue's order, target chain, suspension and
// barriers, and `dispatchPrecondition(condition: .onQueue(queue))` holds inside it. The
// item is the job itself: its context is the job's pointer and its function a trampoline
// that finds the executor in the queue the item runs on (the innermost held queue, which
// for an item of this queue is this queue), so an enqueue allocates nothing of its own.
#if GRANDCENTRAL_EXECUTORS
import _Concurrency

#endif

/// A serial queue, as its own type: what an actor can use as its executor.
public final class DispatchSerialQueue: DispatchQueue, @unchecked Sendable {
    /// A new serial queue with a label, QoS and target (the overcommit root queue of its QoS if `nil`).
    public convenience init(label: String, qos: DispatchQoS = .unspecified,
                            autoreleaseFrequency: DispatchQueue.AutoreleaseFrequency = .inherit,
                            target: DispatchQueue? = nil) {
        let a = DispatchQueue.queueAttributes(qos: qos, attributes: [], autoreleaseFrequency: autoreleaseFrequency)
        self.init(role: .serial, label: label, attributes: a,
                  target: target ?? RootQueues.queue(qos: a.qos, overcommit: true))
    }
}

/// A concurrent queue, as its own type: what a task can prefer as its executor.
public final class DispatchConcurrentQueue: DispatchQueue, @unchecked Sendable {
    /// A new concurrent queue with a label, QoS and target (the root queue of its QoS if `nil`).
    public convenience init(label: String, qos: DispatchQoS = .unspecified,
                            autoreleaseFrequency: DispatchQueue.AutoreleaseFrequency = .inherit,
                            target: DispatchQueue? = nil) {
        let a = DispatchQueue.queueAttributes(qos: qos, attributes: .concurrent, autoreleaseFrequency: autoreleaseFrequency)
        self.init(role: .concurrent, label: label, attributes: a,
                  target: target ?? RootQueues.queue(qos: a.qos, overcommit: false))
    }
}

#if GRANDCENTRAL_EXECUTORS
extension DispatchSerialQueue: SerialExecutor {
    /// Runs `job` on this queue, after everything already submitted to it.
    public func enqueue(_ job: consuming ExecutorJob) {
        enqueue(serialJobTrampoline, unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self))
    }

    /// This queue, as the executor an actor's `unownedExecutor` returns.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless the caller runs on this queue: what `assumeIsolated` asks when the
    /// caller is not inside one of this executor's jobs (a block submitted to the queue).
    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(self))
    }
}

extension DispatchConcurrentQueue: TaskExecutor {
    /// Runs `job` on this queue, concurrently with its other work.
    public func enqueue(_ job: consuming ExecutorJob) {
        enqueue(taskJobTrampoline, unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self))
    }

    /// This queue, as the executor `Task(executorPreference:)` takes.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}

/// Runs a job enqueued on a DispatchSerialQueue, as its executor.
private let serialJobTrampoline: DispatchFunction = { context in
    let job = unsafeBitCast(context!, to: UnownedJob.self)
    let queue = unsafeDowncast(HeldQueues.current!, to: DispatchSerialQueue.self)
    job.runSynchronously(on: queue.asUnownedSerialExecutor())
}

/// Runs a job enqueued on a DispatchConcurrentQueue, as its task executor.
private let taskJobTrampoline: DispatchFunction = { context in
    let job = unsafeBitCast(context!, to: UnownedJob.self)
    let queue = unsafeDowncast(HeldQueues.current!, to: DispatchConcurrentQueue.self)
    job.runSynchronously(on: queue.asUnownedTaskExecutor())
}
#endif
