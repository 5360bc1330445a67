/// MESSAGE-INTEGRITY-SHA256: the HMAC-SHA256 of the message up to this attribute, possibly
/// truncated to 16–32 bytes in steps of 4 (RFC 8489 §14.6); other lengths are `.badAttributeLength`.
///
/// For inspecting a received value; to send one, use
/// `StunMessageWriter.appendMessageIntegritySHA256(key:length:)`, and check one with
/// `StunMessage.verifyIntegrity(key:)`.
public struct MessageIntegritySHA256: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    /// Lengths the HMAC may be truncated to (RFC 8489 §14.6).
    public static let allowedLengths: [Int] = [16, 20, 24, 28, 32]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static var attributeType: AttributeType { .messageIntegritySHA256 }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count >= 16, value.count <= 32, value.count & 3 == 0 else {
            throw .badAttributeLength(Self.attributeType)
        }
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
