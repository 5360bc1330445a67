/// XOR-PEER-ADDRESS: a peer's transport address as seen from the relay, XOR-coded like
/// XOR-MAPPED-ADDRESS (RFC 8656 §18.3).
public struct XORPeerAddress: StunAttributeValue, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var attributeType: AttributeType { .xorPeerAddress }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        address = try AddressCoding.decode(value, type: Self.attributeType, xor: transactionID)
    }

    @inlinable
    public var encodedLength: Int { AddressCoding.encodedLength(address) }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        AddressCoding.encode(address, into: value, xor: transactionID)
    }
}
