/// CHANGED-ADDRESS: the address a classic Binding response would come from with both change
/// flags set (RFC 3489 §11.2.5), coded like MAPPED-ADDRESS; OTHER-ADDRESS's predecessor.
public struct ChangedAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .changedAddress }
}
