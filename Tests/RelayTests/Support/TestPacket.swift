import StunCodec

/// Ethernet + IPv4 or IPv6 + UDP frames for running the kernel fast path's program over
/// (BPF_PROG_TEST_RUN), and a parser that checks what it left, checksums included
/// (RFC 791, RFC 768, RFC 8200 §8.1).
enum TestPacket {
    /// ChannelData `channel` carrying `data`, unpadded (RFC 8656 §12.4).
    static func channelData(_ channel: UInt16, _ data: [UInt8]) -> [UInt8] {
        [UInt8(channel >> 8), UInt8(channel & 0xFF), UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
    }

    static func ipv4UDP(from source: TransportAddress, to destination: TransportAddress, payload: [UInt8]) -> [UInt8] {
        let s = source.ip.ipv4Value!, d = destination.ip.ipv4Value!
        let udpLength = 8 + payload.count
        var ip: [UInt8] = [0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0]
        ip[2] = UInt8((20 + udpLength) >> 8)
        ip[3] = UInt8((20 + udpLength) & 0xFF)
        ip += bytes(s) + bytes(d)
        let ipSum = checksum(ip)
        ip[10] = UInt8(ipSum >> 8)
        ip[11] = UInt8(ipSum & 0xFF)
        var udp = bytes16(source.port) + bytes16(destination.port) + bytes16(UInt16(udpLength)) + [0, 0] + payload
        var udpSum = checksum(pseudoHeader(s, d, udpLength) + udp)
        if udpSum == 0 { udpSum = 0xFFFF }
        udp[6] = UInt8(udpSum >> 8)
        udp[7] = UInt8(udpSum & 0xFF)
        let ethernet: [UInt8] = [UInt8](repeating: 0, count: 12) + [0x08, 0x00]
        return ethernet + ip + udp
    }

    /// A UDP datagram in a frame of the addresses' family.
    static func udp(from source: TransportAddress, to destination: TransportAddress, payload: [UInt8]) -> [UInt8] {
        source.ip.family == .ipv4
            ? ipv4UDP(from: source, to: destination, payload: payload)
            : ipv6UDP(from: source, to: destination, payload: payload)
    }

    /// An IPv6 frame whose next header is `nextHeader` (17: UDP, with no extension header).
    static func ipv6UDP(
        from source: TransportAddress, to destination: TransportAddress, payload: [UInt8], nextHeader: UInt8 = 17
    ) -> [UInt8] {
        let udpLength = 8 + payload.count
        var ip: [UInt8] = [0x60, 0, 0, 0] + bytes16(UInt16(udpLength)) + [nextHeader, 64]
        ip += bytes(source.ip) + bytes(destination.ip)
        var udp = bytes16(source.port) + bytes16(destination.port) + bytes16(UInt16(udpLength)) + [0, 0] + payload
        var udpSum = checksum(pseudoHeader6(source.ip, destination.ip, udpLength) + udp)
        if udpSum == 0 { udpSum = 0xFFFF }
        udp[6] = UInt8(udpSum >> 8)
        udp[7] = UInt8(udpSum & 0xFF)
        let ethernet: [UInt8] = [UInt8](repeating: 0, count: 12) + [0x86, 0xDD]
        return ethernet + ip + udp
    }

    struct Parsed {
        var source: TransportAddress
        var destination: TransportAddress
        var payload: [UInt8]
        var ipChecksumValid: Bool
        var udpChecksumValid: Bool
    }

    /// The addresses, payload and checksum validity of an Ethernet + IPv4 (no options) or IPv6
    /// (no extension header) + UDP frame whose lengths agree; nil otherwise. IPv6 has no header
    /// checksum: `ipChecksumValid` is true.
    static func parse(_ frame: [UInt8]) -> Parsed? {
        if frame.count >= 14 + 40 + 8, frame[12] == 0x86, frame[13] == 0xDD { return parse6(frame) }
        guard frame.count >= 14 + 20 + 8, frame[12] == 0x08, frame[13] == 0, frame[14] == 0x45, frame[23] == 17 else {
            return nil
        }
        let ip = Array(frame[14..<34])
        let total = Int(ip[2]) << 8 | Int(ip[3])
        guard total == frame.count - 14 else { return nil }
        let udp = Array(frame[34...])
        let udpLength = Int(udp[4]) << 8 | Int(udp[5])
        guard udpLength == udp.count else { return nil }
        let s = word32(ip, 12), d = word32(ip, 16)
        return Parsed(
            source: TransportAddress(ip: IPAddress(ipv4: s), port: UInt16(udp[0]) << 8 | UInt16(udp[1])),
            destination: TransportAddress(ip: IPAddress(ipv4: d), port: UInt16(udp[2]) << 8 | UInt16(udp[3])),
            payload: Array(udp[8...]),
            ipChecksumValid: checksum(ip) == 0,
            udpChecksumValid: checksum(pseudoHeader(s, d, udpLength) + udp) == 0)
    }

    private static func parse6(_ frame: [UInt8]) -> Parsed? {
        let ip = Array(frame[14..<54])
        guard ip[0] >> 4 == 6, ip[6] == 17, Int(ip[4]) << 8 | Int(ip[5]) == frame.count - 54 else { return nil }
        let udp = Array(frame[54...])
        let udpLength = Int(udp[4]) << 8 | Int(udp[5])
        guard udpLength == udp.count, let s = ip[8..<24].withUnsafeBytes({ IPAddress(bytes: $0) }),
            let d = ip[24..<40].withUnsafeBytes({ IPAddress(bytes: $0) })
        else { return nil }
        return Parsed(
            source: TransportAddress(ip: s, port: UInt16(udp[0]) << 8 | UInt16(udp[1])),
            destination: TransportAddress(ip: d, port: UInt16(udp[2]) << 8 | UInt16(udp[3])),
            payload: Array(udp[8...]),
            ipChecksumValid: true,
            udpChecksumValid: checksum(pseudoHeader6(s, d, udpLength) + udp) == 0)
    }

    /// The Internet checksum (RFC 1071): 0 over data that carries its own correct checksum.
    static func checksum(_ data: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        var i = 0
        while i + 1 < data.count {
            sum += UInt32(data[i]) << 8 | UInt32(data[i + 1])
            i += 2
        }
        if i < data.count { sum += UInt32(data[i]) << 8 }
        while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
    }

    private static func pseudoHeader(_ s: UInt32, _ d: UInt32, _ length: Int) -> [UInt8] {
        bytes(s) + bytes(d) + [0, 17] + bytes16(UInt16(length))
    }

    private static func pseudoHeader6(_ s: IPAddress, _ d: IPAddress, _ length: Int) -> [UInt8] {
        bytes(s) + bytes(d) + bytes(UInt32(length)) + [0, 0, 0, 17]
    }

    private static func bytes(_ ip: IPAddress) -> [UInt8] { (0..<ip.byteCount).map { ip.byte($0) } }
    private static func bytes(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    private static func bytes16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    private static func word32(_ b: [UInt8], _ o: Int) -> UInt32 {
        UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
    }
}
