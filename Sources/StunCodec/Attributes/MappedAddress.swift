/// MAPPED-ADDRESS: the client's reflexive transport address in plain form (RFC 8489 §14.1).
/// Kept for RFC 3489 clients; new responses carry XOR-MAPPED-ADDRESS.
public struct MappedAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .mappedAddress }
}
