/// ALTERNATE-SERVER: a different server the client should try, coded like MAPPED-ADDRESS
/// (RFC 8489 §14.15).
public struct AlternateServer: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .alternateServer }
}
