/// A TURN ChannelData message (RFC 8656 §12.4): channel number, length, application data.
///
/// A view into the caller's bytes; `data` excludes the header and any padding.
public struct ChannelDataMessage {
    public static let headerLength = 4
    /// Channel numbers a client may bind. RFC 8656 §12 narrows them to 0x4000–0x4FFF, but
    /// RFC 5766 §11 allowed 0x4000–0x7FFF and deployed clients (coturn's turnutils_uclient among
    /// them) still pick from the wider range, so the relay accepts it; first bytes 64–127 belong
    /// to no other protocol (RFC 7983 §7).
    public static let channelRange: ClosedRange<UInt16> = 0x4000...0x7FFF
    /// The range RFC 8656 §12 assigns; clients built by relayd pick from this one.
    public static let rfc8656ChannelRange: ClosedRange<UInt16> = 0x4000...0x4FFF

    public let channelNumber: UInt16
    public let data: UnsafeRawBufferPointer

    /// Parses a ChannelData message from a UDP datagram (`padded: false`) or a stream frame
    /// (`padded: true`, RFC 8656 §12.5: padded to a multiple of 4).
    ///
    /// Over UDP the datagram must hold at least the claimed length (RFC 8656 §12.4); up to 3
    /// trailing padding bytes are accepted. Over a stream the frame must be exactly the padded size.
    @inlinable
    public init(parsing bytes: UnsafeRawBufferPointer, padded: Bool = false) throws(StunDecodeError) {
        guard bytes.count >= Self.headerLength else { throw .truncated }
        let channel = bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self).bigEndian
        guard Self.channelRange.contains(channel) else { throw .badChannelNumber }
        let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
        let paddedLength = (length + 3) & ~3
        if padded {
            guard bytes.count == Self.headerLength + paddedLength else { throw .badChannelDataLength }
        } else {
            guard bytes.count >= Self.headerLength + length, bytes.count <= Self.headerLength + paddedLength
            else { throw .badChannelDataLength }
        }
        channelNumber = channel
        data = UnsafeRawBufferPointer(rebasing: bytes[Self.headerLength..<Self.headerLength + length])
    }

    /// Writes the 4-byte header for `length` data bytes at the start of `buffer`.
    @inlinable
    public static func writeHeader(into buffer: UnsafeMutableRawBufferPointer, channelNumber: UInt16, length: Int) {
        buffer.storeBytes(of: channelNumber.bigEndian, toByteOffset: 0, as: UInt16.self)
        buffer.storeBytes(of: UInt16(truncatingIfNeeded: length).bigEndian, toByteOffset: 2, as: UInt16.self)
    }

    /// Size of a ChannelData message carrying `length` data bytes; padded to 4 over streams.
    @inlinable
    public static func encodedLength(dataLength length: Int, padded: Bool) -> Int {
        headerLength + (padded ? (length + 3) & ~3 : length)
    }
}
