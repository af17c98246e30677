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

/// A `dispatch_queue_attr_t`, packed into 13 bits. C handles are addresses inside a
/// static 8 KiB table (`QueueAttributes.table + rawValue`), so every combination has one
/// stable pointer and nothing is allocated per call; `DISPATCH_QUEUE_SERIAL` is NULL and
/// `DISPATCH_QUEUE_CONCURRENT` is `&_dispatch_queue_attr_concurrent`.
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

    nonisolated(unsafe) static let table: UnsafeMutablePointer<UInt8> = {
        let t = UnsafeMutablePointer<UInt8>.allocate(capacity: 1 << 13)
        t.initialize(repeating: 0, count: 1 << 13)
        return t
    }()

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

    /// The C handle of these attributes.
    var handle: UnsafeMutableRawPointer? {
        if rawValue == 0 { return nil }
        if rawValue == 1, let symbol = gc_attr_concurrent_symbol() { return symbol }
        return UnsafeMutableRawPointer(Self.table + rawValue)
    }

    /// Decodes a C handle; nil for a pointer that is not an attribute.
    static func from(handle: UnsafeRawPointer?) -> QueueAttributes? {
        guard let handle else { return .serial }
        if handle == UnsafeRawPointer(gc_attr_concurrent_symbol()) { return .concurrent }
        let offset = handle - UnsafeRawPointer(table)
        guard offset >= 0 && offset < (1 << 13) else { return nil }
        return QueueAttributes(rawValue: offset)
    }
}
