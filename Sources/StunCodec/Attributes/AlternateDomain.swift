/// ALTERNATE-DOMAIN: the DNS name that ALTERNATE-SERVER's TLS/DTLS certificate is checked
/// against (RFC 8489 §14.16). At most 255 ASCII characters (A-labels for IDNs): longer is
/// `.badAttributeLength`, a non-ASCII byte `.badAttributeValue`.
public struct AlternateDomain: StunAttributeValue, Hashable {
    public var value: String

    /// Longest value allowed (RFC 8489 §14.16).
    public static let maxBytes = 255

    public init(value: String) { self.value = value }

    public static var attributeType: AttributeType { .alternateDomain }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        self.value = try ValueCoding.decodeASCII(value, type: Self.attributeType, maxBytes: Self.maxBytes)
    }

    public var encodedLength: Int { value.utf8.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.encodeText(self.value, into: value)
    }
}
