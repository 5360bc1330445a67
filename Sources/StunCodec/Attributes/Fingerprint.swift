/// FINGERPRINT: CRC-32 of the message up to this attribute XOR 0x5354554E (RFC 8489 §14.7).
///
/// For inspection: `StunMessage(parsing:)` already verified it, and
/// `StunMessageWriter.appendFingerprint()` computes it.
public struct Fingerprint: StunAttributeValue, Hashable {
    public var value: UInt32

    @inlinable
    public init(value: UInt32) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .fingerprint }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        self.value = value.loadUnaligned(as: UInt32.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: self.value.bigEndian, as: UInt32.self)
    }
}
