/// XOR-MAPPED-ADDRESS: the client's reflexive transport address, XOR-coded so that NATs
/// rewriting addresses in payloads leave it alone (RFC 8489 §14.2).
public struct XORMappedAddress: StunAttributeValue, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var attributeType: AttributeType { .xorMappedAddress }

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
