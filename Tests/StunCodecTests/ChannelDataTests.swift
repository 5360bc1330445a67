import StunCodec
import Testing

@Suite("ChannelData messages (RFC 8656 §12.4, §12.5)")
struct ChannelDataTests {
    /// Parses `bytes` and returns the channel and a copy of the data.
    static func parse(_ bytes: [UInt8], padded: Bool) throws -> (channel: UInt16, data: [UInt8]) {
        try bytes.withUnsafeBytes { raw in
            let m = try ChannelDataMessage(parsing: raw, padded: padded)
            return (m.channelNumber, Array(m.data))
        }
    }

    @Test("UDP, exact length")
    func udpExact() throws {
        let parsed = try Self.parse([0x40, 0x00, 0x00, 0x03, 0xAA, 0xBB, 0xCC], padded: false)
        #expect(parsed.channel == 0x4000)
        #expect(parsed.data == [0xAA, 0xBB, 0xCC])
    }

    @Test("UDP, padded to 4: the padding is not data", arguments: [1, 2, 3])
    func udpPadded(dataLength: Int) throws {
        let data = [UInt8](repeating: 0x77, count: dataLength)
        let padding = [UInt8](repeating: 0, count: (4 - dataLength % 4) % 4)
        let parsed = try Self.parse([0x4A, 0xBC, 0x00, UInt8(dataLength)] + data + padding, padded: false)
        #expect(parsed.channel == 0x4ABC)
        #expect(parsed.data == data)
    }

    @Test("Stream: the frame is exactly the padded length")
    func stream() throws {
        let frame: [UInt8] = [0x4F, 0xFF, 0x00, 0x05, 1, 2, 3, 4, 5, 0, 0, 0]
        let parsed = try Self.parse(frame, padded: true)
        #expect(parsed.channel == 0x4FFF)
        #expect(parsed.data == [1, 2, 3, 4, 5])
        #expect(throws: StunDecodeError.badChannelDataLength) { try Self.parse(Array(frame.dropLast()), padded: true) }
        #expect(throws: StunDecodeError.badChannelDataLength) { try Self.parse(frame + [0, 0, 0, 0], padded: true) }
    }

    @Test("Empty data")
    func empty() throws {
        let parsed = try Self.parse([0x40, 0x01, 0x00, 0x00], padded: true)
        #expect(parsed.channel == 0x4001)
        #expect(parsed.data.isEmpty)
    }

    @Test(
        "Channel numbers 0x4000–0x7FFF (RFC 8656 range plus RFC 5766's) are ChannelData; the neighbours are not",
        arguments: [
            (0x3FFF, false), (0x4000, true), (0x4FFF, true), (0x5000, true), (0x7FFF, true), (0x8000, false),
        ] as [(UInt16, Bool)])
    func channelRange(channel: UInt16, valid: Bool) {
        #expect(ChannelDataMessage.channelRange.contains(channel) == valid)
        let result = Result { try Self.parse(be16(channel) + [0, 0], padded: false) }
        switch result {
        case .success: #expect(valid)
        case .failure(let error): #expect(!valid && error as? StunDecodeError == .badChannelNumber)
        }
    }

    @Test("writeHeader and encodedLength build what parsing reads", arguments: [false, true])
    func writeHeader(padded: Bool) throws {
        let data: [UInt8] = Array("payload".utf8)
        var frame = [UInt8](
            repeating: 0, count: ChannelDataMessage.encodedLength(dataLength: data.count, padded: padded))
        #expect(frame.count == (padded ? 12 : 11))
        frame.withUnsafeMutableBytes {
            ChannelDataMessage.writeHeader(into: $0, channelNumber: 0x4321, length: data.count)
        }
        frame.replaceSubrange(4..<4 + data.count, with: data)
        let parsed = try Self.parse(frame, padded: padded)
        #expect(parsed.channel == 0x4321)
        #expect(parsed.data == data)
    }

    @Test(
        "The first byte tells STUN, ChannelData and others apart (RFC 7983)",
        arguments: [
            (0x00, PacketKind.stun), (0x03, .stun), (0x04, .other), (0x16, .other), (0x3F, .other),
            (0x40, .channelData), (0x4F, .channelData), (0x50, .channelData), (0x7F, .channelData), (0x80, .other), (0xFF, .other),
        ] as [(UInt8, PacketKind)])
    func packetKind(firstByte: UInt8, kind: PacketKind) {
        #expect(PacketKind(firstByte: firstByte) == kind)
    }
}
