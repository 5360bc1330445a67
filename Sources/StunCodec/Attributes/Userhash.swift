/// USERHASH: SHA-256(OpaqueString(username) ":" OpaqueString(realm)), sent instead of USERNAME
/// for username anonymity (RFC 8489 §14.4). Exactly 32 bytes, else `.badAttributeLength`.
public struct Userhash: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    /// The fixed value length (RFC 8489 §14.4).
    public static let length = 32

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static var attributeType: AttributeType { .userhash }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == Self.length else { throw .badAttributeLength(Self.attributeType) }
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
