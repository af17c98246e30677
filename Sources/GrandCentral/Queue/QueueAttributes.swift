import CGrandCentral

/// The QoS classes, with libdispatch's `qos_class_t` values.
enum QoSLevel: UInt32 {
    case unspecified = 0x00
    case maintenance = 0x05
    case background = 0x09
    case utility = 0x11
    case `default` = 0x15
    case userInitiated = 0x19
    case userInteractive = 0x21

    /// Index of the root queue bucket, 0 (lowest) … 5 (highest); unspecified maps to default.
    var bucket: Int {
        switch self {
        case .maintenance: return 0
        case .background: return 1
        case .utility: return 2
        case .unspecified, .default: return 3
        case .userInitiated: return 4
        case .userInteractive: return 5
        }
    }

    static let byBucket: [QoSLevel] = [.maintenance, .background, .utility, .default, .userInitiated, .userInteractive]
}

/// A queue's attributes (`dispatch_queue_attr_t`), packed into 13 bits. (The C ABI turns
/// each combination into a stable pointer of its own: GrandCentralExports/Handles.swift.)
///
/// ```
/// bit 0      concurrent
/// bit 1      initially inactive
/// bits 2-3   overcommit: 0 unspecified, 1 enabled, 2 disabled
/// bits 4-6   QoS index (0 unspecified, 1 maintenance … 6 user-interactive)
/// bits 7-10  -relative priority (0 … 15)
/// bits 11-12 autorelease frequency (0 inherit, 1 work item, 2 never)
/// ```
struct QueueAttributes: Equatable {
    var rawValue: Int

    static let qosOrder: [QoSLevel] = [.unspecified, .maintenance, .background, .utility, .default, .userInitiated, .userInteractive]

    init(rawValue: Int) { self.rawValue = rawValue & 0x1FFF }

    static let serial = QueueAttributes(rawValue: 0)
    static let concurrent = QueueAttributes(rawValue: 1)

    var isConcurrent: Bool {
        get { rawValue & 1 != 0 }
        set { rawValue = newValue ? rawValue | 1 : rawValue & ~1 }
    }
    var isInitiallyInactive: Bool {
        get { rawValue & 2 != 0 }
        set { rawValue = newValue ? rawValue | 2 : rawValue & ~2 }
    }
    /// nil when unspecified.
    var overcommit: Bool? {
        get { switch (rawValue >> 2) & 3 { case 1: return true; case 2: return false; default: return nil } }
        set { rawValue = (rawValue & ~(3 << 2)) | ((newValue == nil ? 0 : newValue! ? 1 : 2) << 2) }
    }
    var qos: QoSLevel {
        get { Self.qosOrder[min((rawValue >> 4) & 7, 6)] }
        set { rawValue = (rawValue & ~(7 << 4)) | (Self.qosOrder.firstIndex(of: newValue)! << 4) }
    }
    var relativePriority: Int32 {
        get { -Int32((rawValue >> 7) & 15) }
        set { rawValue = (rawValue & ~(15 << 7)) | (Int(min(15, max(0, -newValue))) << 7) }
    }
    var autoreleaseFrequency: Int {
        get { (rawValue >> 11) & 3 }
        set { rawValue = (rawValue & ~(3 << 11)) | ((newValue & 3) << 11) }
    }
}
