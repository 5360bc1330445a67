/// One attribute as it sits in a received message: its type, its value bytes (without padding),
/// and where its TLV header starts. A view into the caller's buffer: no copy.
public struct RawAttribute {
    public let type: AttributeType
    public let value: UnsafeRawBufferPointer
    /// Offset of the attribute's 4-byte header from the start of the message.
    public let offset: Int

    @inlinable
    public init(type: AttributeType, value: UnsafeRawBufferPointer, offset: Int) {
        self.type = type
        self.value = value
        self.offset = offset
    }
}

/// Walks the attributes of a validated message in order (RFC 8489 §14).
public struct AttributeIterator: IteratorProtocol, Sequence {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var offset: Int
    @usableFromInline let end: Int

    @inlinable
    init(bytes: UnsafeRawBufferPointer, end: Int) {
        self.bytes = bytes
        self.offset = StunConstants.headerLength
        self.end = end
    }

    @inlinable
    public mutating func next() -> RawAttribute? {
        guard offset + 4 <= end else { return nil }
        let type = AttributeType(rawValue: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian)
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
        let valueStart = offset + 4
        let attr = RawAttribute(
            type: type, value: UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueStart + length]), offset: offset)
        offset = valueStart + ((length + 3) & ~3)
        return attr
    }
}
