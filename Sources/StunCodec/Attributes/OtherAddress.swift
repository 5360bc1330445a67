/// OTHER-ADDRESS: the server's alternate address for NAT behaviour discovery, coded like
/// MAPPED-ADDRESS (RFC 5780 §7.4).
public struct OtherAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .otherAddress }
}
