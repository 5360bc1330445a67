/// The transport between client and server (RFC 8656 §3.1).
public enum TransportProtocol: UInt8, Sendable, Hashable, CaseIterable {
    case udp
    case tcp
    case tls
    /// DTLS over UDP (RFC 8656 §3.1, docs/dtls.md): datagrams, one STUN message or ChannelData
    /// per record.
    case dtls

    /// Stream transports carry ChannelData padded to 4 bytes (RFC 8656 §12.5).
    @inlinable
    public var isStream: Bool { self == .tcp || self == .tls }

    public var label: String {
        switch self {
        case .udp: return "udp"
        case .tcp: return "tcp"
        case .tls: return "tls"
        case .dtls: return "dtls"
        }
    }
}
