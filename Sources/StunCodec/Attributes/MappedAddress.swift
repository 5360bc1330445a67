/// MAPPED-ADDRESS: the client's reflexive transport address in plain form (RFC 8489 §14.1).
/// Kept for RFC 3489 clients; new responses carry XOR-MAPPED-ADDRESS.
public struct MappedAddress: StunAttributeValue, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var attributeType: AttributeType { .mappedAddress }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        address = try AddressCoding.decode(value, type: Self.attributeType, xor: nil)
    }

    @inlinable
    public var encodedLength: Int { AddressCoding.encodedLength(address) }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        AddressCoding.encode(address, into: value, xor: nil)
    }
}
