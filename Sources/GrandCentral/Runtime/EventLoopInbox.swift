import Synchronization

/// How an `EventLoopInbox` links its nodes: which stored field of the node is the link.
/// A node can sit in several inboxes at once if each uses its own link field.
protocol EventLoopInboxLink {
    associatedtype Node: AnyObject
    static func next(of node: Node) -> UnsafeMutableRawPointer?
    static func setNext(of node: Node, to next: UnsafeMutableRawPointer?)
}

/// The way other threads hand work to the event thread: an intrusive multi-producer stack
/// that the event thread empties all at once.
///
/// Protocol: a producer links its node to the current head and publishes it with one
/// compare-exchange; the event thread takes the whole list with one exchange to nil,
/// reverses it (so nodes come out in the order they were pushed: a thread that schedules
/// two timers with the same deadline sees them fire in that order) and walks it. There is
/// no ABA problem: nodes are only ever pushed, and only the consumer removes, all at once.
/// A node is in a given inbox at most once at a time (callers guarantee it: a timer by its
/// request's `isQueued` flag; a rearm by a flag; a registration command by being new).
/// Rejected: a lock and an array (a lock on every `dispatch_after`, and an allocation when
/// the array grows), and a Vyukov MPSC queue (FIFO for free, but its consumer can observe a producer halfway
/// through a push and must spin; taking the whole stack never waits).
///
/// The inbox holds a +1 reference (`Unmanaged`) on each node while it is linked.
///
/// Orderings are sequentially consistent, not just release (push) / acquire (take): the
/// event loop pairs "push, then read the armed instant" on the producer side with "publish
/// the armed instant, then check the inbox" on the event thread, a store-load (Dekker)
/// pattern that only a single total order makes safe (see `EventLoop`).
struct EventLoopInbox<Link: EventLoopInboxLink>: ~Copyable {
    private let head = Atomic<UnsafeMutableRawPointer?>(nil)

    init() {}

    /// Pushes `node` (retaining it). Any thread.
    func push(_ node: Link.Node) {
        let raw = Unmanaged.passRetained(node).toOpaque()
        var expected = head.load(ordering: .relaxed)
        while true {
            // Written before the publishing compare-exchange, read by the consumer after
            // its exchange: the plain field is ordered by the two atomics.
            Link.setNext(of: node, to: expected)
            let (exchanged, current) = head.compareExchange(
                expected: expected, desired: raw,
                successOrdering: .sequentiallyConsistent, failureOrdering: .relaxed)
            if exchanged { return }
            expected = current
        }
    }

    /// Whether the inbox is empty right now (sequentially consistent, see above).
    var isEmpty: Bool { head.load(ordering: .sequentiallyConsistent) == nil }

    /// Takes every node and calls `body` on each, oldest push first, releasing the
    /// inbox's reference afterwards. The event thread only.
    ///
    /// The link of a node is read before `body` runs, so `body` may make the node
    /// eligible for a new push (e.g. clear its rearm flag) without corrupting the walk.
    func drain(_ body: (Link.Node) -> Void) {
        var cursor = head.exchange(nil, ordering: .sequentiallyConsistent)
        // Reverse the list: pushes were LIFO.
        var reversed: UnsafeMutableRawPointer? = nil
        while let raw = cursor {
            let node = Unmanaged<Link.Node>.fromOpaque(raw).takeUnretainedValue()
            cursor = Link.next(of: node)
            Link.setNext(of: node, to: reversed)
            reversed = raw
        }
        while let raw = reversed {
            let node = Unmanaged<Link.Node>.fromOpaque(raw).takeRetainedValue()
            reversed = Link.next(of: node)
            Link.setNext(of: node, to: nil)
            body(node)
        }
    }
}

// MARK: - Registration commands

/// A registration on the event loop, for unregistering it (and, for descriptors, rearming
/// it): the owner keeps the token; the loop keeps the registration in its table.
struct RegistrationToken<Registration: AnyObject & Sendable>: Sendable {
    let registration: Registration
}

/// The inbox of one kind of registration (descriptors, files, signals): registering and
/// unregistering travel to the event thread as commands in one inbox, so a register
/// followed by an unregister is applied in that order. Registrations come and go rarely
/// (once per source), so each command is its own small allocation. Protocol, the same for
/// every kind: `unregister(_:completion:context:)` calls `completion(context)` on the event
/// thread after the kind's table has let the registration go, and the kind calls its
/// registration's handler never again after that, so the owner may then deliver its cancel
/// handler. Each kind's file says what registering and unregistering do to its table.
/// Neither call wakes the loop: the caller does, once it has pushed.
struct RegistrationInbox<Registration: AnyObject>: ~Copyable {
    private let commands = EventLoopInbox<RegistrationCommandLink<Registration>>()

    init() {}

    /// Queues `registration` to be registered. Any thread.
    func register(_ registration: Registration) {
        commands.push(RegistrationCommand(.register, registration))
    }

    /// Queues `registration` to be unregistered, then `completion(context)`. Any thread.
    func unregister(_ registration: Registration, completion: DispatchFunction,
                    context: UnsafeMutableRawPointer?) {
        commands.push(RegistrationCommand(.unregister(completion: completion, context: context), registration))
    }

    /// Whether no command waits (sequentially consistent, like `EventLoopInbox.isEmpty`).
    var isEmpty: Bool { commands.isEmpty }

    /// Applies every waiting command in submission order: `register` for a registration,
    /// `unregister` and then the command's completion for an unregistration. Returns
    /// whether there was any command. The event thread only.
    @discardableResult
    func drain(register: (Registration) -> Void, unregister: (Registration) -> Void) -> Bool {
        var any = false
        commands.drain { command in
            any = true
            switch command.kind {
            case .register:
                register(command.registration)
            case .unregister(let completion, let context):
                unregister(command.registration)
                completion(context)
            }
        }
        return any
    }
}

/// A registration change travelling to the event thread.
private final class RegistrationCommand<Registration: AnyObject>: @unchecked Sendable {
    enum Kind {
        case register
        case unregister(completion: DispatchFunction, context: UnsafeMutableRawPointer?)
    }

    let kind: Kind
    let registration: Registration
    /// The inbox's link (written by the pusher, read by the event thread, ordered by the
    /// inbox's atomics).
    var link: UnsafeMutableRawPointer?

    init(_ kind: Kind, _ registration: Registration) {
        self.kind = kind
        self.registration = registration
    }
}

private enum RegistrationCommandLink<Registration: AnyObject>: EventLoopInboxLink {
    static func next(of node: RegistrationCommand<Registration>) -> UnsafeMutableRawPointer? { node.link }
    static func setNext(of node: RegistrationCommand<Registration>, to next: UnsafeMutableRawPointer?) {
        node.link = next
    }
}
