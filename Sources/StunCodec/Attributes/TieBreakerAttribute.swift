/// ICE-CONTROLLED and ICE-CONTROLLING: the sender's role, and a 64-bit tie-breaker that settles
/// role conflicts (RFC 8445 §7.1.3, §16.1). Exactly 8 bytes, else `.badAttributeLength`.
public protocol TieBreakerAttribute: StunAttributeValue {
    var tieBreaker: UInt64 { get }
    init(tieBreaker: UInt64)
}

extension TieBreakerAttribute {
    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 8 else { throw .badAttributeLength(Self.attributeType) }
        self.init(tieBreaker: value.loadUnaligned(as: UInt64.self).bigEndian)
    }

    @inlinable
    public var encodedLength: Int { 8 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: tieBreaker.bigEndian, as: UInt64.self)
    }
}
