/// XOR-RELAYED-ADDRESS: the relayed transport address the server allocated, XOR-coded like
/// XOR-MAPPED-ADDRESS (RFC 8656 §18.5).
public struct XORRelayedAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { true }

    @inlinable
    public static var attributeType: AttributeType { .xorRelayedAddress }
}
