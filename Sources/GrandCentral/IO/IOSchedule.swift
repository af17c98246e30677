import Glibc

// The order of the operations and barriers of every channel on one descriptor.
//
// A barrier applies to the descriptor, not to one channel (dispatch_io_barrier(3)): when
// several channels share a descriptor (made on the same client descriptor, or with
// dispatch_io_create_with_io), a barrier scheduled on any of them waits for the earlier
// operations of all of them and holds back their later ones. So the list that orders
// operations and barriers belongs to the descriptor (IODescriptor.schedule), and one lock
// guards it together with the scheduling fields of every channel on the descriptor (see
// IOChannel). Operations of different channels still run independently of each other,
// one at a time per direction per channel, as before.
//
// Rejected: a list per channel plus a count of pending operations per descriptor that
// barriers wait on (libdispatch's barrier group); it says when a barrier may run but not
// which later operations it holds back, which is what the shared list says by position.

/// One entry of a descriptor's schedule.
enum IOItem {
    case operation(IOOperation)
    /// A barrier of `channel`.
    case barrier(IOChannel, () -> Void)

    /// The channel the entry belongs to.
    var channel: IOChannel {
        switch self {
        case .operation(let op): return op.channel
        case .barrier(let channel, _): return channel
        }
    }
}

final class IOSchedule: @unchecked Sendable {
    /// Guards every field below, and the scheduling fields of every channel on the
    /// descriptor. Held only for short sections that do no I/O.
    let lock = SpinLock()
    /// Operations not yet finished-and-delivered and barriers not yet started, of every
    /// channel on the descriptor, in submission order.
    var items: [IOItem] = []
    /// The channel whose barrier is running, or nil. While one runs, nothing starts.
    var barrierChannel: IOChannel?
    /// The thread running that barrier (`pthread_self`), 0 otherwise.
    var barrierThread: pthread_t = 0

    /// Whether any entry belongs to `channel`. Under `lock`.
    func hasItems(of channel: IOChannel) -> Bool {
        items.contains { $0.channel === channel }
    }
}
