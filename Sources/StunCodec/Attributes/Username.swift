/// USERNAME: the username of the credential a request is authenticated with (RFC 8489 §14.3).
///
/// Senders keep it under 509 bytes of UTF-8; receivers must accept up to 763 bytes for RFC 5389
/// peers (§14.3), so decoding rejects only longer values (`.badAttributeLength`) and ill-formed
/// UTF-8 (`.badAttributeValue`). The value is compared as received: OpaqueString preparation
/// is the credential store's job.
public struct Username: TextAttribute, Hashable {
    public var value: String

    /// Longest value accepted on receipt (RFC 8489 §14.3).
    public static let maxDecodedBytes = 763

    /// Longest value a compliant sender uses: fewer than 509 bytes (RFC 8489 §14.3). A server
    /// that authenticates the USERNAME answers longer ones 400 (the codec still parses them).
    public static let maxBytes = 508

    public init(value: String) { self.value = value }

    public static var attributeType: AttributeType { .username }
}
