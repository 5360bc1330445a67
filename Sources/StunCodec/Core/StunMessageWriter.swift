/// Writes a STUN message into a caller-provided buffer (RFC 8489 §5, §14), keeping the header's
/// length field current after every attribute so that MESSAGE-INTEGRITY and FINGERPRINT,
/// appended last, cover the right bytes. Nothing is allocated.
public struct StunMessageWriter {
    public let buffer: UnsafeMutableRawBufferPointer
    public let transactionID: TransactionID
    /// Bytes written so far (header included).
    public var count: Int { _count }
    @usableFromInline var _count: Int

    /// Starts a message: writes the 20-byte header with length 0.
    @inlinable
    public init(into buffer: UnsafeMutableRawBufferPointer, type: MessageType, transactionID: TransactionID)
        throws(StunEncodeError)
    {
        guard buffer.count >= StunConstants.headerLength else { throw .bufferTooSmall }
        self.buffer = buffer
        self.transactionID = transactionID
        self._count = StunConstants.headerLength
        buffer.storeBytes(of: type.rawValue.bigEndian, toByteOffset: 0, as: UInt16.self)
        buffer.storeBytes(of: UInt16(0).bigEndian, toByteOffset: 2, as: UInt16.self)
        buffer.storeBytes(of: StunConstants.magicCookie.bigEndian, toByteOffset: 4, as: UInt32.self)
        transactionID.write(to: UnsafeMutableRawBufferPointer(rebasing: buffer[8..<20]))
    }

    /// The message written so far.
    @inlinable
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[0..<count]) }

    /// Reserves an attribute of `length` value bytes, lets `body` fill them, pads with zeros.
    @inlinable
    public mutating func appendAttribute(
        _ type: AttributeType, length: Int, _ body: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(StunEncodeError) {
        guard length <= 0xFFFF else { throw .valueTooLong }
        let padded = (length + 3) & ~3
        let end = count + 4 + padded
        guard end <= buffer.count else { throw .bufferTooSmall }
        guard end - StunConstants.headerLength <= 0xFFFF else { throw .valueTooLong }
        buffer.storeBytes(of: type.rawValue.bigEndian, toByteOffset: count, as: UInt16.self)
        buffer.storeBytes(of: UInt16(length).bigEndian, toByteOffset: count + 2, as: UInt16.self)
        body(UnsafeMutableRawBufferPointer(rebasing: buffer[count + 4..<count + 4 + length]))
        for i in (count + 4 + length)..<end { buffer[i] = 0 }
        _count = end
        setLength(count - StunConstants.headerLength)
    }

    /// Appends a typed attribute.
    @inlinable
    public mutating func append<A: StunAttributeValue>(_ attribute: A) throws(StunEncodeError) {
        let txid = transactionID
        try appendAttribute(A.attributeType, length: attribute.encodedLength) { attribute.encode(into: $0, transactionID: txid) }
    }

    /// Appends an attribute with the given value bytes (unknown attributes, DATA, relayed payloads).
    @inlinable
    public mutating func append(_ type: AttributeType, value: UnsafeRawBufferPointer) throws(StunEncodeError) {
        try appendAttribute(type, length: value.count) { out in
            if value.count > 0 { out.copyMemory(from: value) }
        }
    }

    /// Appends MESSAGE-INTEGRITY: HMAC-SHA1 under `key` over the message so far, with the
    /// header length already counting this attribute (RFC 8489 §14.5).
    @inlinable
    public mutating func appendMessageIntegrity(key: UnsafeRawBufferPointer) throws(StunEncodeError) {
        try appendIntegrity(.messageIntegrity, algorithm: .sha1, key: key, length: 20)
    }

    /// MESSAGE-INTEGRITY with a key held in an array (control path).
    public mutating func appendMessageIntegrity(key: [UInt8]) throws(StunEncodeError) {
        var failure: StunEncodeError? = nil
        key.withUnsafeBytes { k in
            do throws(StunEncodeError) { try appendMessageIntegrity(key: k) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Appends MESSAGE-INTEGRITY-SHA256, optionally truncated to 16–32 bytes in steps of 4 (RFC 8489 §14.6).
    @inlinable
    public mutating func appendMessageIntegritySHA256(key: UnsafeRawBufferPointer, length: Int = 32)
        throws(StunEncodeError)
    {
        guard length >= 16, length <= 32, length & 3 == 0 else { throw .badIntegrityLength }
        try appendIntegrity(.messageIntegritySHA256, algorithm: .sha256, key: key, length: length)
    }

    /// MESSAGE-INTEGRITY-SHA256 (32 bytes) with a key held in an array (control path).
    public mutating func appendMessageIntegritySHA256(key: [UInt8]) throws(StunEncodeError) {
        var failure: StunEncodeError? = nil
        key.withUnsafeBytes { k in
            do throws(StunEncodeError) { try appendMessageIntegritySHA256(key: k) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    @usableFromInline
    mutating func appendIntegrity(_ type: AttributeType, algorithm: DigestAlgorithm, key: UnsafeRawBufferPointer, length: Int)
        throws(StunEncodeError)
    {
        let start = count
        guard start + 4 + length <= buffer.count else { throw .bufferTooSmall }
        guard start + 4 + length - StunConstants.headerLength <= 0xFFFF else { throw .valueTooLong }
        setLength(start + 4 + length - StunConstants.headerLength)
        let covered = UnsafeRawBufferPointer(rebasing: buffer[0..<start])
        let out = UnsafeMutableRawBufferPointer(rebasing: buffer[start + 4..<start + 4 + length])
        buffer.storeBytes(of: type.rawValue.bigEndian, toByteOffset: start, as: UInt16.self)
        buffer.storeBytes(of: UInt16(length).bigEndian, toByteOffset: start + 2, as: UInt16.self)
        algorithm.hmac(key: key, covered, into: out)
        _count = start + 4 + length
    }

    /// Appends FINGERPRINT: CRC-32 of the message so far, with the header length already
    /// counting this attribute, XOR 0x5354554E (RFC 8489 §14.7). Must be the last attribute.
    @inlinable
    public mutating func appendFingerprint() throws(StunEncodeError) {
        let start = count
        guard start + 8 <= buffer.count else { throw .bufferTooSmall }
        guard start + 8 - StunConstants.headerLength <= 0xFFFF else { throw .valueTooLong }
        setLength(start + 8 - StunConstants.headerLength)
        let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: buffer[0..<start])) ^ StunConstants.fingerprintXOR
        buffer.storeBytes(of: AttributeType.fingerprint.rawValue.bigEndian, toByteOffset: start, as: UInt16.self)
        buffer.storeBytes(of: UInt16(4).bigEndian, toByteOffset: start + 2, as: UInt16.self)
        buffer.storeBytes(of: crc.bigEndian, toByteOffset: start + 4, as: UInt32.self)
        _count = start + 8
    }

    @inlinable
    mutating func setLength(_ length: Int) {
        buffer.storeBytes(of: UInt16(length).bigEndian, toByteOffset: 2, as: UInt16.self)
    }
}
