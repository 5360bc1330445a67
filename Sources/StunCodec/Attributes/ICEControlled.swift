/// ICE-CONTROLLED: the sender thinks it is the controlled agent; the 64-bit tie-breaker
/// settles role conflicts (RFC 8445 §7.1.3, §16.1). Exactly 8 bytes, else `.badAttributeLength`.
public struct ICEControlled: StunAttributeValue, Hashable {
    public var tieBreaker: UInt64

    @inlinable
    public init(tieBreaker: UInt64) { self.tieBreaker = tieBreaker }

    @inlinable
    public static var attributeType: AttributeType { .iceControlled }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 8 else { throw .badAttributeLength(Self.attributeType) }
        tieBreaker = value.loadUnaligned(as: UInt64.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 8 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: tieBreaker.bigEndian, as: UInt64.self)
    }
}
