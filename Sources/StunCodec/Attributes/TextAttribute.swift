/// An attribute whose value is UTF-8 text with a size limit on receipt (USERNAME, REALM, NONCE,
/// SOFTWARE; RFC 8489 §14.3, §14.9, §14.10, §14.14). The coding is shared; each attribute names
/// its type and limits.
public protocol TextAttribute: StunAttributeValue {
    var value: String { get }
    init(value: String)
    /// Longest value accepted on receipt, in bytes; longer is `.badAttributeLength`.
    static var maxDecodedBytes: Int { get }
    /// When set, the value must have fewer Unicode scalars than this (`.badAttributeValue`).
    static var maxCharacters: Int? { get }
}

extension TextAttribute {
    public static var maxCharacters: Int? { nil }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        self.init(
            value: try ValueCoding.decodeText(
                value, type: Self.attributeType, maxBytes: Self.maxDecodedBytes, maxCharacters: Self.maxCharacters))
    }

    public var encodedLength: Int { value.utf8.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.encodeText(self.value, into: value)
    }
}
