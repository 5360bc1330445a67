/// The transport between client and server (RFC 8656 §3.1); the relay leg is always UDP here.
public enum TransportProtocol: UInt8, Sendable, Hashable, CaseIterable {
    case udp
    case tcp
    case tls

    /// Stream transports carry ChannelData padded to 4 bytes (RFC 8656 §12.5).
    @inlinable
    public var isStream: Bool { self != .udp }

    public var label: String {
        switch self {
        case .udp: return "udp"
        case .tcp: return "tcp"
        case .tls: return "tls"
        }
    }
}
