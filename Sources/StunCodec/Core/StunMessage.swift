/// A received STUN message, validated and indexed in one pass over the caller's bytes (RFC 8489 §5, §14).
///
/// A view: it holds a pointer into the buffer it was parsed from and copies nothing, so the
/// buffer must outlive it. Attributes after MESSAGE-INTEGRITY other than MESSAGE-INTEGRITY-SHA256
/// and FINGERPRINT are not returned by `attribute(_:)` and are counted in
/// `ignoredAfterIntegrity` (RFC 8489 §14.5).
public struct StunMessage {
    public let bytes: UnsafeRawBufferPointer
    public let type: MessageType
    public let transactionID: TransactionID
    /// Offset of MESSAGE-INTEGRITY's TLV header, when present.
    public let integrityOffset: Int?
    /// Offset of MESSAGE-INTEGRITY-SHA256's TLV header, when present.
    public let integritySHA256Offset: Int?
    /// Offset of FINGERPRINT's TLV header, when present (it was verified during parsing).
    public let fingerprintOffset: Int?
    /// End of the attributes that integrity protects and that `attribute(_:)` searches.
    public let trustedEnd: Int
    /// Number of attributes that followed the integrity attribute(s) and are ignored.
    public let ignoredAfterIntegrity: Int

    /// Validates `bytes` as exactly one STUN message (a whole UDP datagram or one framed stream message).
    ///
    /// Checks RFC 8489 §5: two zero bits, magic cookie, length multiple of 4 and equal to the
    /// bytes after the header; every attribute inside the message; FINGERPRINT last and correct.
    @inlinable
    public init(parsing bytes: UnsafeRawBufferPointer) throws(StunDecodeError) {
        guard bytes.count >= StunConstants.headerLength else { throw .truncated }
        let rawType = bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self).bigEndian
        guard rawType & 0xC000 == 0 else { throw .notStun }
        let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
        guard bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self).bigEndian == StunConstants.magicCookie
        else { throw .badMagicCookie }
        guard length & 3 == 0, StunConstants.headerLength + length == bytes.count else { throw .badMessageLength }

        var integrity: Int? = nil
        var integrity256: Int? = nil
        var fingerprint: Int? = nil
        var trustedEnd = bytes.count
        var ignored = 0
        var offset = StunConstants.headerLength
        while offset < bytes.count {
            guard fingerprint == nil else { throw .attributeAfterFingerprint }
            guard offset + 4 <= bytes.count else { throw .attributeOverrun }
            let type = AttributeType(rawValue: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian)
            let valueLength = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
            let next = offset + 4 + ((valueLength + 3) & ~3)
            guard next <= bytes.count else { throw .attributeOverrun }
            switch type {
            case .messageIntegrity where integrity == nil && integrity256 == nil:
                guard valueLength == 20 else { throw .badAttributeLength(type) }
                integrity = offset
                trustedEnd = offset
            case .messageIntegritySHA256 where integrity256 == nil:
                guard valueLength >= 16, valueLength <= 32, valueLength & 3 == 0 else { throw .badAttributeLength(type) }
                integrity256 = offset
                if integrity == nil { trustedEnd = offset }
            case .fingerprint:
                guard valueLength == 4 else { throw .badAttributeLength(type) }
                fingerprint = offset
            default:
                if integrity != nil || integrity256 != nil { ignored += 1 }
            }
            offset = next
        }
        if let fp = fingerprint {
            let expected = bytes.loadUnaligned(fromByteOffset: fp + 4, as: UInt32.self).bigEndian
            let actual = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<fp])) ^ StunConstants.fingerprintXOR
            guard expected == actual else { throw .badFingerprint }
            if integrity == nil && integrity256 == nil { trustedEnd = fp }
        }
        self.bytes = bytes
        self.type = MessageType(rawValue: rawType)
        self.transactionID = TransactionID(bytes: UnsafeRawBufferPointer(rebasing: bytes[8..<20]))
        self.integrityOffset = integrity
        self.integritySHA256Offset = integrity256
        self.fingerprintOffset = fingerprint
        self.trustedEnd = trustedEnd
        self.ignoredAfterIntegrity = ignored
    }

    /// The attributes before MESSAGE-INTEGRITY (or before FINGERPRINT), in order.
    @inlinable
    public var attributes: AttributeIterator { AttributeIterator(bytes: bytes, end: trustedEnd) }

    /// Every attribute in the message, including integrity, fingerprint and ignored ones.
    @inlinable
    public var allAttributes: AttributeIterator { AttributeIterator(bytes: bytes, end: bytes.count) }

    /// The first attribute of `type` among those that count (RFC 8489 §14: later duplicates are ignored).
    ///
    /// MESSAGE-INTEGRITY, MESSAGE-INTEGRITY-SHA256 and FINGERPRINT count too, although they sit at
    /// or after `trustedEnd`: they are the ones found during parsing.
    @inlinable
    public func attribute(_ type: AttributeType) -> RawAttribute? {
        switch type {
        case .messageIntegrity: return integrityOffset.map(rawAttribute(at:))
        case .messageIntegritySHA256: return integritySHA256Offset.map(rawAttribute(at:))
        case .fingerprint: return fingerprintOffset.map(rawAttribute(at:))
        default: break
        }
        var it = attributes
        while let a = it.next() {
            if a.type == type { return a }
        }
        return nil
    }

    /// The attribute whose TLV header starts at `offset` (already validated by parsing).
    @inlinable
    func rawAttribute(at offset: Int) -> RawAttribute {
        let type = AttributeType(rawValue: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian)
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
        return RawAttribute(
            type: type, value: UnsafeRawBufferPointer(rebasing: bytes[offset + 4..<offset + 4 + length]), offset: offset)
    }

    /// Decodes the first attribute of `A`'s type, or nil when absent.
    @inlinable
    public func decode<A: StunAttributeValue>(_: A.Type) throws(StunDecodeError) -> A? {
        guard let raw = attribute(A.attributeType) else { return nil }
        return try A(decoding: raw.value, transactionID: transactionID)
    }

    /// True when the message has the attribute `type` among those that count.
    @inlinable
    public func contains(_ type: AttributeType) -> Bool { attribute(type) != nil }
}
