/// The two class bits of a STUN message type (RFC 8489 §5).
public enum MessageClass: UInt8, Sendable, Hashable, CaseIterable {
    case request = 0b00
    case indication = 0b01
    case successResponse = 0b10
    case errorResponse = 0b11
}
