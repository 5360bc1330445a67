/// RESPONSE-PORT: the port a Binding response should be sent to, followed by 2 bytes of padding
/// sent as zero and ignored (RFC 5780 §7.5). Exactly 4 bytes, else `.badAttributeLength`.
public struct ResponsePort: StunAttributeValue, Hashable {
    public var port: UInt16

    @inlinable
    public init(port: UInt16) { self.port = port }

    @inlinable
    public static var attributeType: AttributeType { .responsePort }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        port = value.loadUnaligned(as: UInt16.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: port.bigEndian, as: UInt16.self)
        value.storeBytes(of: UInt16(0), toByteOffset: 2, as: UInt16.self)
    }
}
