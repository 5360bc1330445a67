import StunCodec
import Testing

@Suite("Stream framing over TCP/TLS (RFC 8489 §6.2.2, RFC 8656 §12.5)")
struct StreamFramerTests {
    static func frame(_ bytes: [UInt8]) throws -> StreamFramer.Frame? {
        try bytes.withUnsafeBytes { try StreamFramer.nextFrame(in: $0) }
    }

    @Test("Nothing received yet: nil")
    func empty() throws {
        #expect(try Self.frame([]) == nil)
    }

    @Test("A whole STUN message, with the next one's first bytes behind it")
    func stunMessage() throws {
        let message = RFC5769.ipv6Response
        #expect(try Self.frame(message) == StreamFramer.Frame(kind: .stun, length: message.count))
        #expect(try Self.frame(message + [0x00, 0x01]) == StreamFramer.Frame(kind: .stun, length: message.count))
    }

    @Test("A ChannelData frame includes its padding over a stream")
    func channelData() throws {
        let frame: [UInt8] = [0x40, 0x00, 0x00, 0x01, 0x99, 0, 0, 0]
        #expect(try Self.frame(frame) == StreamFramer.Frame(kind: .channelData, length: 8))
        #expect(try Self.frame(Array(frame.prefix(5))) == nil, "data there, padding not yet")
    }

    @Test("Several frames coalesced in one read: the framer walks them one by one")
    func coalesced() throws {
        let channelA: [UInt8] = [0x40, 0x01, 0x00, 0x03, 1, 2, 3, 0]
        let channelB: [UInt8] = [0x4F, 0xFF, 0x00, 0x00]
        let channelC: [UInt8] = [0x41, 0x00, 0x00, 0x04, 9, 9, 9, 9]
        let built = try buildMessage(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: address("203.0.113.5:4000")))
            try w.append(DataAttribute(bytes: [7, 7, 7]))
        }
        let parts: [(PacketKind, [UInt8])] = [
            (.stun, RFC5769.request), (.channelData, channelA), (.stun, RFC5769.ipv4Response), (.channelData, channelB),
            (.stun, built), (.channelData, channelC), (.stun, RFC5769.longTermRequest),
        ]
        let stream = parts.flatMap(\.1)
        let partialTail = Array(RFC5769.ipv6Response.prefix(30))
        var seen: [(PacketKind, [UInt8])] = []
        try (stream + partialTail).withUnsafeBytes { all in
            var offset = 0
            while let f = try StreamFramer.nextFrame(in: UnsafeRawBufferPointer(rebasing: all[offset...])) {
                let bytes = UnsafeRawBufferPointer(rebasing: all[offset..<offset + f.length])
                switch f.kind {
                case .stun: _ = try StunMessage(parsing: bytes)
                case .channelData: _ = try ChannelDataMessage(parsing: bytes, padded: true)
                case .other: Issue.record("unexpected kind")
                }
                seen.append((f.kind, Array(bytes)))
                offset += f.length
            }
            #expect(offset == stream.count, "stops at the partial message")
        }
        #expect(seen.map(\.0) == parts.map(\.0))
        #expect(seen.map(\.1) == parts.map(\.1))
    }

    @Test(
        "A first byte that is neither STUN nor ChannelData closes the stream",
        arguments: [
            0x04, 0x16, 0x17, 0x3F, 0x80, 0xC0, 0xFF,
        ] as [UInt8])
    func notStun(firstByte: UInt8) {
        #expect(throws: StunDecodeError.notStun) { try Self.frame([firstByte]) }
        #expect(throws: StunDecodeError.notStun) { try Self.frame([firstByte] + RFC5769.request.dropFirst()) }
    }

    @Test("A bad cookie or a length not a multiple of 4 is caught before the body arrives")
    func badHeader() {
        #expect(throws: StunDecodeError.badMagicCookie) {
            try Self.frame(rawMessage(cookie: 0xDEAD_BEEF).prefix(8) + [])
        }
        #expect(throws: StunDecodeError.badMessageLength) { try Self.frame([0x00, 0x01, 0x00, 0x05]) }
    }

    @Test("A header promising more than arrived: nil, however much is missing")
    func waitsForBody() throws {
        #expect(try Self.frame(rawMessage(length: 0xFFFC)) == nil)
        #expect(try Self.frame([0x40, 0x00, 0xFF, 0xFF, 1, 2, 3]) == nil)
    }
}
