/// NONCE: the server's nonce, echoed by the client in authenticated requests (RFC 8489 §14.10).
///
/// Fewer than 128 characters and at most 763 bytes on receipt: longer is `.badAttributeLength`,
/// too many characters or ill-formed UTF-8 `.badAttributeValue`.
public struct Nonce: TextAttribute, Hashable {
    public var value: String

    /// Longest value accepted on receipt, in bytes (RFC 8489 §14.10).
    public static let maxDecodedBytes = 763
    /// The value must have fewer than this many characters (RFC 8489 §14.10).
    public static let maxCharacters: Int? = 128

    public init(value: String) { self.value = value }

    public static var attributeType: AttributeType { .nonce }
}
