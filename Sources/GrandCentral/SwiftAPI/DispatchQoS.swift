/// Quality of service, spelled like Swift's Dispatch.
public struct DispatchQoS: Equatable, Sendable {
    /// The class of service.
    public let qosClass: QoSClass
    /// The priority within the class, from -15 (lowest) to 0.
    public let relativePriority: Int

    /// The classes of service, from background to user-interactive.
    public enum QoSClass: Sendable {
        case background, utility, `default`, userInitiated, userInteractive, unspecified

        /// The libdispatch `qos_class_t` value (Dispatch on Linux does not make it public).
        var rawValue: UInt32 { level.rawValue }

        init?(rawValue: UInt32) {
            guard let level = QoSLevel(rawValue: rawValue) else { return nil }
            self.init(level: level)
        }

        init(level: QoSLevel) {
            switch level {
            case .maintenance, .background: self = .background
            case .utility: self = .utility
            case .default: self = .default
            case .userInitiated: self = .userInitiated
            case .userInteractive: self = .userInteractive
            case .unspecified: self = .unspecified
            }
        }

        var level: QoSLevel {
            switch self {
            case .background: return .background
            case .utility: return .utility
            case .default: return .default
            case .userInitiated: return .userInitiated
            case .userInteractive: return .userInteractive
            case .unspecified: return .unspecified
            }
        }
    }

    /// Work the user does not see: backups, indexing.
    public static let background = DispatchQoS(qosClass: .background, relativePriority: 0)
    /// Long-running work the user knows about: downloads, imports.
    public static let utility = DispatchQoS(qosClass: .utility, relativePriority: 0)
    /// The class between utility and user-initiated.
    public static let `default` = DispatchQoS(qosClass: .default, relativePriority: 0)
    /// Work the user started and waits for.
    public static let userInitiated = DispatchQoS(qosClass: .userInitiated, relativePriority: 0)
    /// Work that keeps the interface responsive.
    public static let userInteractive = DispatchQoS(qosClass: .userInteractive, relativePriority: 0)
    /// No class given: inherit it.
    public static let unspecified = DispatchQoS(qosClass: .unspecified, relativePriority: 0)

    /// A QoS of `qosClass` at `relativePriority` within it.
    public init(qosClass: QoSClass, relativePriority: Int) {
        self.qosClass = qosClass
        self.relativePriority = relativePriority
    }
}

/// Two QoS values are equal when class and relative priority are.
public func == (a: DispatchQoS, b: DispatchQoS) -> Bool {
    a.qosClass == b.qosClass && a.relativePriority == b.relativePriority
}

/// Flags for work items, spelled like Swift's Dispatch. `.barrier` is honoured; the QoS
/// flags are accepted (items run at their queue's QoS).
public struct DispatchWorkItemFlags: OptionSet, Sendable {
    /// The flag bits.
    public let rawValue: UInt
    /// Flags from their bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// The item runs alone on a concurrent queue, after everything before it.
    public static let barrier = DispatchWorkItemFlags(rawValue: 0x1)
    /// Accepted for compatibility; the item runs at its queue's QoS.
    public static let detached = DispatchWorkItemFlags(rawValue: 0x2)
    /// Accepted; the item runs at its queue's QoS.
    public static let assignCurrentContext = DispatchWorkItemFlags(rawValue: 0x4)
    /// Accepted; the item runs at its queue's QoS.
    public static let noQoS = DispatchWorkItemFlags(rawValue: 0x8)
    /// Accepted; the item runs at its queue's QoS.
    public static let inheritQoS = DispatchWorkItemFlags(rawValue: 0x10)
    /// Accepted; the item runs at its queue's QoS.
    public static let enforceQoS = DispatchWorkItemFlags(rawValue: 0x20)
}