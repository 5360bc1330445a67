/// XOR-PEER-ADDRESS: a peer's transport address as seen from the relay, XOR-coded like
/// XOR-MAPPED-ADDRESS (RFC 8656 §18.3).
public struct XORPeerAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { true }

    @inlinable
    public static var attributeType: AttributeType { .xorPeerAddress }
}
