/// REQUESTED-TRANSPORT: the IP protocol number of the transport to relay over, followed by 24
/// RFFU bits (RFC 8656 §18.8; TCP allocations RFC 6062 §6.1). Exactly 4 bytes, else
/// `.badAttributeLength`. Any protocol decodes; unsupported ones are answered with 442.
public struct RequestedTransport: StunAttributeValue, Hashable {
    public var protocolNumber: UInt8

    /// UDP, protocol 17 (RFC 8656 §18.8).
    public static let udp = RequestedTransport(protocolNumber: 17)
    /// TCP, protocol 6 (RFC 6062 §6.1).
    public static let tcp = RequestedTransport(protocolNumber: 6)

    @inlinable
    public init(protocolNumber: UInt8) { self.protocolNumber = protocolNumber }

    @inlinable
    public static var attributeType: AttributeType { .requestedTransport }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        protocolNumber = value[0]
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: (UInt32(protocolNumber) << 24).bigEndian, as: UInt32.self)
    }
}
