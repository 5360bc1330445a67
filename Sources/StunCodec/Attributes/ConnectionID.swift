/// CONNECTION-ID: identifies a TCP peer connection of a TCP allocation in Connect,
/// ConnectionBind and ConnectionAttempt (RFC 6062 §6.2.1). Exactly 4 bytes, else `.badAttributeLength`.
public struct ConnectionID: UInt32Attribute, Hashable {
    public var value: UInt32

    @inlinable
    public init(value: UInt32) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .connectionID }
}
