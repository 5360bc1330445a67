import StunCodec

/// A PROXY protocol version 2 header: what a load balancer in front of relayd (HAProxy, a cloud
/// balancer) writes first on each connection it opens to say whose connection it is
/// (docs/tls.md, "Behind a load balancer"). The layout, from HAProxy's specification of the
/// protocol (section 2.2):
///
///     12 bytes  signature  0D 0A 0D 0A 00 0D 0A 51 55 49 54 0A
///      1 byte   version (high 4 bits, 2) and command (low 4 bits: 0 LOCAL, 1 PROXY)
///      1 byte   address family (high 4 bits: 0 UNSPEC, 1 INET, 2 INET6, 3 UNIX) and
///               transport (low 4 bits: 0 UNSPEC, 1 STREAM, 2 DGRAM)
///      2 bytes  length of what follows, network order
///     INET:  source, destination address (4 bytes each), source, destination port (2 each)
///     INET6: the same with 16-byte addresses; then TLVs, which relayd skips.
///
/// Only ever read from sources `proxy-protocol-from` lists: anyone else could claim any address.
struct ProxyHeader: Equatable {
    /// The client the balancer accepted; nil for a LOCAL header (the balancer's own health
    /// check) or an address family relayd does not take (UNSPEC, UNIX): the connection is
    /// then the balancer's own.
    let source: TransportAddress?
    /// The address the client connected to on the balancer.
    let destination: TransportAddress?

    enum Parse: Equatable {
        /// Too few bytes yet to tell.
        case needMore
        /// Not a version 2 header, or one that cannot be: the reason.
        case invalid(String)
        /// A header of `length` bytes; what follows is the client's own stream.
        case header(ProxyHeader, length: Int)
    }

    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// The fixed part: signature, version and command, family, length.
    static let fixedLength = 16
    /// Headers longer than this (address block plus TLVs) are refused: a balancer's TLVs (ALPN,
    /// authority, unique ID, SSL details) fit easily; anything longer is not worth holding.
    static let maxLength = 1024

    /// Whether `bytes` can still be the start of a version 2 header (false at the first byte
    /// that differs from the signature).
    static func mayStart(_ bytes: UnsafeRawBufferPointer) -> Bool {
        zip(bytes, signature).allSatisfy { $0 == $1 }
    }

    /// Reads the header at the start of `bytes`.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Parse {
        guard mayStart(bytes) else { return .invalid("not a PROXY protocol v2 signature") }
        guard bytes.count >= fixedLength else { return .needMore }
        let versionCommand = bytes[12]
        guard versionCommand >> 4 == 2 else { return .invalid("PROXY protocol version \(versionCommand >> 4)") }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid("PROXY protocol command \(command)") }
        let length = fixedLength + Int(bytes[14]) << 8 + Int(bytes[15])
        guard length <= maxLength else { return .invalid("PROXY protocol header of \(length) bytes") }
        guard bytes.count >= length else { return .needMore }
        let family = bytes[13] >> 4
        let block = UnsafeRawBufferPointer(rebasing: bytes[fixedLength..<length])
        // LOCAL: the balancer speaks for itself; the address block, if any, is ignored.
        guard command == 1 else { return .header(ProxyHeader(source: nil, destination: nil), length: length) }
        switch family {
        case 1:
            guard block.count >= 12 else { return .invalid("PROXY protocol INET block of \(block.count) bytes") }
            let source = IPAddress(ipv4: read32(block, 0))
            let destination = IPAddress(ipv4: read32(block, 4))
            return .header(
                ProxyHeader(
                    source: TransportAddress(ip: source, port: read16(block, 8)),
                    destination: TransportAddress(ip: destination, port: read16(block, 10))),
                length: length)
        case 2:
            guard block.count >= 36 else { return .invalid("PROXY protocol INET6 block of \(block.count) bytes") }
            let source = IPAddress(ipv6High: read64(block, 0), low: read64(block, 8))
            let destination = IPAddress(ipv6High: read64(block, 16), low: read64(block, 24))
            return .header(
                ProxyHeader(
                    source: TransportAddress(ip: source, port: read16(block, 32)),
                    destination: TransportAddress(ip: destination, port: read16(block, 34))),
                length: length)
        case 0, 3:
            // UNSPEC or UNIX: no address relayd can use; the connection stays the balancer's.
            return .header(ProxyHeader(source: nil, destination: nil), length: length)
        default:
            return .invalid("PROXY protocol address family \(family)")
        }
    }

    private static func read16(_ b: UnsafeRawBufferPointer, _ i: Int) -> UInt16 {
        UInt16(b[i]) << 8 | UInt16(b[i + 1])
    }

    private static func read32(_ b: UnsafeRawBufferPointer, _ i: Int) -> UInt32 {
        UInt32(read16(b, i)) << 16 | UInt32(read16(b, i + 2))
    }

    private static func read64(_ b: UnsafeRawBufferPointer, _ i: Int) -> UInt64 {
        UInt64(read32(b, i)) << 32 | UInt64(read32(b, i + 4))
    }
}
