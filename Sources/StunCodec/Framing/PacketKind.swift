/// What a datagram or stream frame is, judged by its first byte (RFC 7983 §7, RFC 8656 §12).
public enum PacketKind: Sendable, Hashable {
    /// First byte 0–3: a STUN message.
    case stun
    /// First byte 64–127: TURN ChannelData (RFC 8656 uses 64–79; RFC 5766 clients up to 127).
    case channelData
    /// Anything else is not ours (DTLS, RTP, SRTP ... must not reach a TURN server directly).
    case other

    @inlinable
    public init(firstByte: UInt8) {
        switch firstByte {
        case 0...3: self = .stun
        case 64...127: self = .channelData
        default: self = .other
        }
    }
}
