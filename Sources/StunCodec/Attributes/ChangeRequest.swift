/// CHANGE-REQUEST: asks the server to answer from another IP address (A bit, 0x4) and/or another
/// port (B bit, 0x2) (RFC 5780 §7.2). Exactly 4 bytes, else `.badAttributeLength`; other bits
/// are ignored.
public struct ChangeRequest: StunAttributeValue, Hashable {
    public var changeIP: Bool
    public var changePort: Bool

    @usableFromInline static let changeIPBit: UInt32 = 0x4
    @usableFromInline static let changePortBit: UInt32 = 0x2

    @inlinable
    public init(changeIP: Bool, changePort: Bool) {
        self.changeIP = changeIP
        self.changePort = changePort
    }

    @inlinable
    public static var attributeType: AttributeType { .changeRequest }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        let flags = value.loadUnaligned(as: UInt32.self).bigEndian
        changeIP = flags & Self.changeIPBit != 0
        changePort = flags & Self.changePortBit != 0
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        let flags = (changeIP ? Self.changeIPBit : 0) | (changePort ? Self.changePortBit : 0)
        value.storeBytes(of: flags.bigEndian, as: UInt32.self)
    }
}
