/// EVEN-PORT: asks for an even relayed port and, with the R bit (0x80), for the next port to be
/// reserved as well (RFC 8656 §18.7). Exactly 1 byte, else `.badAttributeLength`; the 7 RFFU
/// bits are ignored.
public struct EvenPort: StunAttributeValue, Hashable {
    public var reservePair: Bool

    @inlinable
    public init(reservePair: Bool) { self.reservePair = reservePair }

    @inlinable
    public static var attributeType: AttributeType { .evenPort }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 1 else { throw .badAttributeLength(Self.attributeType) }
        reservePair = value[0] & 0x80 != 0
    }

    @inlinable
    public var encodedLength: Int { 1 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value[0] = reservePair ? 0x80 : 0
    }
}
