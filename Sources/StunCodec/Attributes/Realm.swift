/// REALM: the authentication realm, an unquoted realm-value (RFC 8489 §14.9).
///
/// Must be UTF-8 of fewer than 128 characters and at most 763 bytes on receipt: longer is
/// `.badAttributeLength`, too many characters or ill-formed UTF-8 `.badAttributeValue`.
public struct Realm: TextAttribute, Hashable {
    public var value: String

    /// Longest value accepted on receipt, in bytes (RFC 8489 §14.9).
    public static let maxDecodedBytes = 763
    /// The value must have fewer than this many characters (RFC 8489 §14.9).
    public static let maxCharacters: Int? = 128

    public init(value: String) { self.value = value }

    public static var attributeType: AttributeType { .realm }
}
