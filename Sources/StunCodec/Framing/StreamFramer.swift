/// Finds message boundaries in a TCP/TLS byte stream carrying STUN messages and ChannelData
/// (RFC 8489 §6.2.2, RFC 8656 §12.5).
///
/// Stateless: give it the bytes received so far; it answers with the first whole frame's kind
/// and length, `nil` when more bytes are needed, and throws only when the bytes cannot start a
/// valid frame (the connection should then be closed).
public enum StreamFramer {
    public struct Frame: Sendable, Hashable {
        public let kind: PacketKind
        /// Bytes the frame occupies on the stream, including ChannelData padding.
        public let length: Int

        @inlinable
        public init(kind: PacketKind, length: Int) {
            self.kind = kind
            self.length = length
        }
    }

    @inlinable
    public static func nextFrame(in bytes: UnsafeRawBufferPointer) throws(StunDecodeError) -> Frame? {
        guard let first = bytes.first else { return nil }
        switch PacketKind(firstByte: first) {
        case .stun:
            guard bytes.count >= 4 else { return nil }
            let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
            guard length & 3 == 0 else { throw .badMessageLength }
            if bytes.count >= 8 {
                guard bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self).bigEndian == StunConstants.magicCookie
                else { throw .badMagicCookie }
            }
            let total = StunConstants.headerLength + length
            return bytes.count >= total ? Frame(kind: .stun, length: total) : nil
        case .channelData:
            guard bytes.count >= 4 else { return nil }
            let channel = bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self).bigEndian
            guard ChannelDataMessage.channelRange.contains(channel) else { throw .badChannelNumber }
            let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
            let total = ChannelDataMessage.encodedLength(dataLength: length, padded: true)
            return bytes.count >= total ? Frame(kind: .channelData, length: total) : nil
        case .other:
            throw .notStun
        }
    }
}
