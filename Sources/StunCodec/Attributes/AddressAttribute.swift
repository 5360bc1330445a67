/// An attribute whose value is one transport address (RFC 8489 §14.1 plain form, §14.2 XOR
/// form). The coding is shared; each attribute names only its type and whether it is XOR-coded.
public protocol AddressAttribute: StunAttributeValue {
    var address: TransportAddress { get }
    init(address: TransportAddress)
    /// True for the XOR form, which masks the port and address with the magic cookie and
    /// transaction ID (RFC 8489 §14.2).
    static var isXORCoded: Bool { get }
}

extension AddressAttribute {
    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        self.init(
            address: try AddressCoding.decode(
                value, type: Self.attributeType, xor: Self.isXORCoded ? transactionID : nil))
    }

    @inlinable
    public var encodedLength: Int { AddressCoding.encodedLength(address) }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        AddressCoding.encode(address, into: value, xor: Self.isXORCoded ? transactionID : nil)
    }
}
