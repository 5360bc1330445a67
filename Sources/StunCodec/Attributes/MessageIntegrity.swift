/// MESSAGE-INTEGRITY: the 20-byte HMAC-SHA1 of the message up to this attribute (RFC 8489 §14.5).
///
/// For inspecting a received value; to send one, use `StunMessageWriter.appendMessageIntegrity(key:)`,
/// which computes it, and check one with `StunMessage.verifyIntegrity(key:)`.
public struct MessageIntegrity: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    /// The HMAC-SHA1 length (RFC 8489 §14.5).
    public static let length = 20

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static var attributeType: AttributeType { .messageIntegrity }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == Self.length else { throw .badAttributeLength(Self.attributeType) }
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
