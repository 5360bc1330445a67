/// PRIORITY: the priority a peer-reflexive candidate learnt from this check would get
/// (RFC 8445 §7.1.1, §16.1). Exactly 4 bytes, else `.badAttributeLength`.
public struct Priority: UInt32Attribute, Hashable {
    public var value: UInt32

    @inlinable
    public init(value: UInt32) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .priority }
}
