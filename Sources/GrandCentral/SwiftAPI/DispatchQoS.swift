/// Quality of service, spelled like Swift's Dispatch.
public struct DispatchQoS: Equatable, Sendable {
    public let qosClass: QoSClass
    public let relativePriority: Int

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

    public static let background = DispatchQoS(qosClass: .background, relativePriority: 0)
    public static let utility = DispatchQoS(qosClass: .utility, relativePriority: 0)
    public static let `default` = DispatchQoS(qosClass: .default, relativePriority: 0)
    public static let userInitiated = DispatchQoS(qosClass: .userInitiated, relativePriority: 0)
    public static let userInteractive = DispatchQoS(qosClass: .userInteractive, relativePriority: 0)
    public static let unspecified = DispatchQoS(qosClass: .unspecified, relativePriority: 0)

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
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let barrier = DispatchWorkItemFlags(rawValue: 0x1)
    public static let detached = DispatchWorkItemFlags(rawValue: 0x2)
    public static let assignCurrentContext = DispatchWorkItemFlags(rawValue: 0x4)
    public static let noQoS = DispatchWorkItemFlags(rawValue: 0x8)
    public static let inheritQoS = DispatchWorkItemFlags(rawValue: 0x10)
    public static let enforceQoS = DispatchWorkItemFlags(rawValue: 0x20)
}