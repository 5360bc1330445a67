import StunCodec
import Testing

/// Every strict prefix of a valid input must fail cleanly: parsing throws (never crashes or
/// reads past the end) and the stream framer asks for more bytes.
@Suite("Drip feed: every prefix of a valid input")
struct DripFeedTests {
    /// The RFC 5769 vectors, plus a writer-built message carrying many attribute kinds.
    static let messages: [(name: String, bytes: [UInt8])] = RFC5769.all + [("writer-built Allocate", allocate)]

    static let allocate: [UInt8] = try! buildMessage(MessageType(method: .allocate, messageClass: .request)) { w in
        try w.append(RequestedTransport.udp)
        try w.append(Lifetime(seconds: 600))
        try w.append(Username(value: "4102444800:alice"))
        try w.append(Realm(value: "example.org"))
        try w.append(Nonce(value: "abcdef"))
        try w.append(XORPeerAddress(address: address("[2001:db8::2]:9")))
        try Array("key".utf8).withUnsafeBytes { k in try w.appendMessageIntegrity(key: k) }
        try w.appendFingerprint()
    }

    @Test("StunMessage(parsing:) rejects every strict prefix", arguments: messages)
    func parserRejectsPrefixes(_ vector: (name: String, bytes: [UInt8])) {
        #expect(parseError(vector.bytes) == nil)
        for n in 0..<vector.bytes.count {
            let expected: StunDecodeError = n < 20 ? .truncated : .badMessageLength
            #expect(parseError(Array(vector.bytes[0..<n])) == expected, "prefix of \(n) bytes")
        }
    }

    @Test("The stream framer wants more bytes for every strict prefix, and frames the whole", arguments: messages)
    func framerWaitsForWholeMessage(_ vector: (name: String, bytes: [UInt8])) throws {
        for n in 0..<vector.bytes.count {
            let frame = try Array(vector.bytes[0..<n]).withUnsafeBytes { try StreamFramer.nextFrame(in: $0) }
            #expect(frame == nil, "prefix of \(n) bytes")
        }
        let whole = try vector.bytes.withUnsafeBytes { try StreamFramer.nextFrame(in: $0) }
        #expect(whole == StreamFramer.Frame(kind: .stun, length: vector.bytes.count))
    }

    static let channelData: [(name: String, bytes: [UInt8])] = [
        ("empty", [0x40, 0x00, 0x00, 0x00]),
        ("3 bytes + 1 padding", [0x40, 0x01, 0x00, 0x03, 0xAA, 0xBB, 0xCC, 0x00]),
        ("4 bytes", [0x4F, 0xFF, 0x00, 0x04, 1, 2, 3, 4]),
        ("101 bytes + 3 padding", [0x41, 0x23, 0x00, 101] + [UInt8](repeating: 0x5A, count: 101) + [0, 0, 0]),
    ]

    @Test(
        "ChannelData over a stream: nil for every strict prefix, the padded length for the whole",
        arguments: channelData)
    func framerWaitsForWholeChannelData(_ frame: (name: String, bytes: [UInt8])) throws {
        for n in 0..<frame.bytes.count {
            let found = try Array(frame.bytes[0..<n]).withUnsafeBytes { try StreamFramer.nextFrame(in: $0) }
            #expect(found == nil, "prefix of \(n) bytes")
        }
        let whole = try frame.bytes.withUnsafeBytes { try StreamFramer.nextFrame(in: $0) }
        #expect(whole == StreamFramer.Frame(kind: .channelData, length: frame.bytes.count))
        try frame.bytes.withUnsafeBytes { bytes in
            let message = try ChannelDataMessage(parsing: bytes, padded: true)
            #expect(message.data.count == Int(frame.bytes[2]) << 8 | Int(frame.bytes[3]))
        }
    }

    @Test("ChannelData parsing rejects every prefix shorter than the data", arguments: channelData)
    func channelDataRejectsPrefixes(_ frame: (name: String, bytes: [UInt8])) {
        let dataEnd = 4 + (Int(frame.bytes[2]) << 8 | Int(frame.bytes[3]))
        for n in 0..<dataEnd {
            let error = Array(frame.bytes[0..<n]).withUnsafeBytes { bytes -> StunDecodeError? in
                do throws(StunDecodeError) {
                    _ = try ChannelDataMessage(parsing: bytes)
                    return nil
                } catch {
                    return error
                }
            }
            #expect(error == (n < 4 ? .truncated : .badChannelDataLength), "prefix of \(n) bytes")
        }
    }
}
