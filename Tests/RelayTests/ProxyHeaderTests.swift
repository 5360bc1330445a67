import StunCodec
import Testing

@testable import Relay

/// The PROXY protocol v2 header as a balancer writes it (docs/tls.md, "Behind a load
/// balancer"), and the first byte that says what a shared port's connection speaks.
@Suite struct ProxyHeaderTests {
    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    static func header(command: UInt8 = 0x21, family: UInt8 = 0x11, block: [UInt8]) -> [UInt8] {
        signature + [command, family, UInt8(block.count >> 8), UInt8(block.count & 0xFF)] + block
    }

    static let inet: [UInt8] = [203, 0, 113, 7, 192, 0, 2, 1, 0x9C, 0x40, 0x01, 0xBB]

    private func parse(_ bytes: [UInt8]) -> ProxyHeader.Parse {
        bytes.withUnsafeBytes { ProxyHeader.parse($0) }
    }

    @Test("An INET header names the client and the balancer's address, whatever follows")
    func inet() throws {
        let bytes = Self.header(block: Self.inet) + [0x00, 0x01]
        guard case .header(let header, let length) = parse(bytes) else { Issue.record("\(parse(bytes))"); return }
        #expect(length == 28)
        #expect(header.source == TransportAddress(ip: try #require(IPAddress("203.0.113.7")), port: 40000))
        #expect(header.destination == TransportAddress(ip: try #require(IPAddress("192.0.2.1")), port: 443))
    }

    @Test("An INET6 header, with TLVs after the addresses, which are skipped")
    func inet6() throws {
        var block = [UInt8](repeating: 0, count: 36)
        block[0] = 0x20
        block[1] = 0x01
        block[2] = 0x0D
        block[3] = 0xB8
        block[15] = 0x05
        block[31] = 0x01
        block[32] = 0x13
        block[33] = 0x88
        block[35] = 0x50
        let tlv: [UInt8] = [0x01, 0x00, 0x02, 0x68, 0x32]  // PP2_TYPE_ALPN "h2"
        guard case .header(let header, let length) = parse(Self.header(family: 0x21, block: block + tlv)) else {
            Issue.record("not parsed")
            return
        }
        #expect(length == 16 + 36 + 5)
        #expect(header.source == TransportAddress(ip: try #require(IPAddress("2001:db8::5")), port: 5000))
        #expect(header.destination?.port == 80)
    }

    @Test("LOCAL, UNSPEC and UNIX headers leave the connection the balancer's")
    func local() {
        for bytes in [
            Self.header(command: 0x20, block: Self.inet), Self.header(command: 0x20, family: 0x00, block: []),
            Self.header(family: 0x00, block: []), Self.header(family: 0x31, block: [UInt8](repeating: 0, count: 216)),
        ] {
            guard case .header(let header, let length) = parse(bytes) else {
                Issue.record("not parsed: \(bytes.prefix(16))")
                continue
            }
            #expect(header.source == nil && length == bytes.count)
        }
    }

    @Test("Every cut of a header asks for more, never a misread")
    func cuts() {
        let bytes = Self.header(block: Self.inet)
        for cut in 0..<bytes.count {
            #expect(parse(Array(bytes[..<cut])) == .needMore, "cut at \(cut)")
        }
    }

    @Test("A wrong signature, version, command or family, a short block or an overlong header is refused")
    func refused() {
        var wrong = Self.header(block: Self.inet)
        wrong[3] = 0x0B
        let cases: [[UInt8]] = [
            wrong,
            Self.header(command: 0x11, block: Self.inet),
            Self.header(command: 0x22, block: Self.inet),
            Self.header(family: 0x41, block: Self.inet),
            Self.header(block: Array(Self.inet.prefix(11))),
            Self.header(family: 0x21, block: Self.inet),
            Self.header(block: [UInt8](repeating: 0, count: 2000)),
        ]
        for bytes in cases {
            guard case .invalid = parse(bytes) else {
                Issue.record("accepted: \(bytes.prefix(16))")
                continue
            }
        }
    }

    @Test("Random bytes after the signature are parsed or refused, never trap")
    func random() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let length = Int.random(in: 0...80, using: &generator)
            let tail = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = parse(Self.signature + tail)
        }
    }

    @Test("The first byte decides what a shared port's connection speaks")
    func openings() {
        #expect(StreamOpening(firstByte: 0x16) == .tls)
        #expect((0...3).allSatisfy { StreamOpening(firstByte: UInt8($0)) == .stun })
        #expect(StreamOpening(firstByte: 0x0D) == .proxyHeader)
        #expect(StreamOpening(firstByte: UInt8(ascii: "G")) == .http)
        #expect(StreamOpening(firstByte: UInt8(ascii: "P")) == .http)
        for byte in [0x04, 0x15, 0x17, 0x40, 0x80, 0xFF] as [UInt8] {
            #expect(StreamOpening(firstByte: byte) == .unknown || StreamOpening(firstByte: byte) == .http)
        }
        #expect(StreamOpening(firstByte: 0x80) == .unknown)
    }
}
