/// CHANNEL-NUMBER: the channel a ChannelBind request binds, followed by 16 RFFU bits that are
/// sent as zero and ignored (RFC 8656 §18.1). Exactly 4 bytes, else `.badAttributeLength`.
///
/// Any number decodes; whether it lies in 0x4000–0x7FFF (`ChannelDataMessage.channelRange`)
/// is the server's check, answered with 400 (RFC 8656 §12.2).
public struct ChannelNumber: StunAttributeValue, Hashable {
    public var value: UInt16

    @inlinable
    public init(value: UInt16) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .channelNumber }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        self.value = value.loadUnaligned(as: UInt16.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: self.value.bigEndian, as: UInt16.self)
        value.storeBytes(of: UInt16(0), toByteOffset: 2, as: UInt16.self)
    }
}
