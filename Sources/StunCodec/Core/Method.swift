/// A 12-bit STUN method (RFC 8489 §5, §18.2; TURN methods RFC 8656 §17; RFC 6062 §6.1).
///
/// An open set: unknown methods keep their value so they can be answered or relayed.
public struct Method: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt16

    /// Values above 0xFFF cannot be carried in a message type and are masked.
    @inlinable
    public init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }

    public static let binding = Method(rawValue: 0x001)
    public static let allocate = Method(rawValue: 0x003)
    public static let refresh = Method(rawValue: 0x004)
    public static let send = Method(rawValue: 0x006)
    public static let data = Method(rawValue: 0x007)
    public static let createPermission = Method(rawValue: 0x008)
    public static let channelBind = Method(rawValue: 0x009)
    public static let connect = Method(rawValue: 0x00A)
    public static let connectionBind = Method(rawValue: 0x00B)
    public static let connectionAttempt = Method(rawValue: 0x00C)
}
