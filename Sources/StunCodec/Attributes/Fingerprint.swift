/// FINGERPRINT: CRC-32 of the message up to this attribute XOR 0x5354554E (RFC 8489 §14.7).
///
/// For inspection: `StunMessage(parsing:)` already verified it, and
/// `StunMessageWriter.appendFingerprint()` computes it.
public struct Fingerprint: UInt32Attribute, Hashable {
    public var value: UInt32

    @inlinable
    public init(value: UInt32) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .fingerprint }
}
