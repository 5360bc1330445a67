/// SOFTWARE: a description of the sender's software, for diagnostics only (RFC 8489 §14.14).
///
/// It has no effect on the protocol, so decoding checks only what a round trip needs: at most
/// 763 bytes (`.badAttributeLength`) of well-formed UTF-8 (`.badAttributeValue`); the
/// 128-character limit is the sender's to keep.
public struct Software: TextAttribute, Hashable {
    public var value: String

    /// Longest value accepted on receipt (RFC 8489 §14.14).
    public static let maxDecodedBytes = 763

    public init(value: String) { self.value = value }

    public static var attributeType: AttributeType { .software }
}
