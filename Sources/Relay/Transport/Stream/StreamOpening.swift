/// What a connection's first byte says it speaks, on a port that serves more than one thing
/// (docs/tls.md, "One port for everything"). Only the first byte decides, as RFC 7983 §7 does for
/// datagrams: later bytes cannot, since "GE" is also a valid ChannelData channel number.
enum StreamOpening: Equatable {
    /// 22, a TLS handshake record (RFC 8446 §5.1, ContentType `handshake`).
    case tls
    /// 0–3, a STUN message (RFC 7983 §7; RFC 8489 §5: the first two bits are zero, and every
    /// method defined is below 0x400). ChannelData (64–79) cannot come first: no channel is
    /// bound on a new connection.
    case stun
    /// 13, the first byte of a PROXY protocol v2 signature (`ProxyHeader`).
    case proxyHeader
    /// An upper-case ASCII letter: an HTTP request line (RFC 9112 §3).
    case http
    case unknown

    init(firstByte byte: UInt8) {
        switch byte {
        case 0x16: self = .tls
        case 0x00...0x03: self = .stun
        case 0x0D: self = .proxyHeader
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): self = .http
        default: self = .unknown
        }
    }

    /// What a connection's listener lets its first bytes be.
    struct Expected: Equatable {
        /// TLS (a TLS listener, or a port TLS shares).
        var tls: Bool
        /// STUN and ChannelData in the clear (a TCP listener, or a port TCP shares).
        var plain: Bool
        /// A PROXY protocol header first: the source is one `proxy-protocol-from` lists, and no
        /// header came yet.
        var proxyHeader: Bool
        /// The HTTP API shares the port (`APIHandoff`): over TLS (ALPN `http/1.1`, or a request
        /// line first), and with `plainHTTP` (an API without TLS) in the clear too.
        var api = false
        var plainHTTP = false
        /// The API's own port (`apiServedByLoops`): every connection is the API's, over the
        /// API's TLS context when it has one.
        var apiOnly = false
    }
}
