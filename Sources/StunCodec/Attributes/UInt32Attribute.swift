/// An attribute whose value is one 32-bit unsigned integer in network order (PRIORITY,
/// RFC 8445 §16.1; FINGERPRINT, RFC 8489 §14.7; CONNECTION-ID, RFC 6062 §6.2.1). Exactly 4
/// bytes, else `.badAttributeLength`.
public protocol UInt32Attribute: StunAttributeValue {
    var value: UInt32 { get }
    init(value: UInt32)
}

extension UInt32Attribute {
    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        self.init(value: value.loadUnaligned(as: UInt32.self).bigEndian)
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: self.value.bigEndian, as: UInt32.self)
    }
}
