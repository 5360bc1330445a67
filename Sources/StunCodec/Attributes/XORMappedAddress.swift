/// XOR-MAPPED-ADDRESS: the client's reflexive transport address, XOR-coded so that NATs
/// rewriting addresses in payloads leave it alone (RFC 8489 §14.2).
public struct XORMappedAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { true }

    @inlinable
    public static var attributeType: AttributeType { .xorMappedAddress }
}
