import StunCodec

/// Ethernet + IPv4 + UDP frames for running the fast path program over (BPF_PROG_TEST_RUN). The
/// program recomputes both checksums after a rewrite, so they are left zero here.
enum Frames {
    static func udp(from source: TransportAddress, to destination: TransportAddress, payload: [UInt8]) -> [UInt8] {
        let udpLength = 8 + payload.count
        var frame = [UInt8](repeating: 0, count: 12) + [0x08, 0x00]
        frame += [0x45, 0, UInt8((20 + udpLength) >> 8), UInt8((20 + udpLength) & 0xFF), 0, 0, 0x40, 0, 64, 17, 0, 0]
        frame += bytes(source.ip.ipv4Value!) + bytes(destination.ip.ipv4Value!)
        frame += bytes16(source.port) + bytes16(destination.port) + bytes16(UInt16(udpLength)) + [0, 0]
        return frame + payload
    }

    /// ChannelData `channel` carrying `data`, unpadded (RFC 8656 §12.4).
    static func channelData(_ channel: UInt16, _ data: [UInt8]) -> [UInt8] {
        bytes16(channel) + bytes16(UInt16(data.count)) + data
    }

    private static func bytes(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
    }
    private static func bytes16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
}
