import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Malformed input is dropped without an answer and counted under a named reason; it never
/// crashes or over-reads (docs/peer-policy.md).
@Suite struct CoreMalformedTests {
    /// A malformed datagram, what it is, and the drop reason it must be counted under.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var reason: DropReason
        var testDescription: String { name }
    }

    private static let binding: [UInt8] = {
        // Binding request, no attributes, fixed transaction ID.
        [0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) }
    }()

    private static func withFingerprint(corrupt: Bool) -> [UInt8] {
        var bytes = [0x00, 0x01, 0x00, 0x08, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) }
        bytes += [0x80, 0x28, 0x00, 0x04, 0, 0, 0, 0]
        let crc = crc32(Array(bytes[0..<20])) ^ 0x5354_554E
        bytes[24] = UInt8(crc >> 24)
        bytes[25] = UInt8((crc >> 16) & 0xFF)
        bytes[26] = UInt8((crc >> 8) & 0xFF)
        bytes[27] = UInt8(crc & 0xFF) ^ (corrupt ? 1 : 0)
        return bytes
    }

    /// CRC-32 (ISO-HDLC), independent of the codec's.
    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    static let cases: [Case] = [
        Case(name: "empty datagram", bytes: [], reason: .malformed),
        Case(name: "truncated header", bytes: Array(binding[0..<10]), reason: .malformed),
        Case(name: "garbage (first byte 0xFF)", bytes: [0xFF, 0x00, 0x12, 0x34, 0x56], reason: .notStun),
        Case(
            name: "DTLS-looking record", bytes: [0x16, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 30), reason: .notStun),
        Case(
            name: "bad magic cookie",
            bytes: [0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x43] + (1...12).map { UInt8($0) }, reason: .malformed),
        Case(
            name: "length not a multiple of 4",
            bytes: [0x00, 0x01, 0x00, 0x02, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) } + [0, 0],
            reason: .malformed),
        Case(
            name: "length beyond the datagram",
            bytes: [0x00, 0x01, 0x00, 0x40, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) }, reason: .malformed),
        Case(
            name: "attribute overrunning the message",
            bytes: [0x00, 0x01, 0x00, 0x08, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) } + [
                0x00, 0x06, 0x00, 0x40, 0x61, 0x62, 0x63, 0x64,
            ], reason: .malformed),
        Case(name: "bad FINGERPRINT", bytes: withFingerprint(corrupt: true), reason: .malformed),
        Case(
            name: "ChannelData claiming 35,510 bytes carrying 3", bytes: [0x40, 0x00, 0x8A, 0xB6, 0x61, 0x62, 0x63],
            reason: .malformed),
        Case(name: "ChannelData shorter than its header", bytes: [0x40, 0x00, 0x00], reason: .malformed),
        Case(name: "ChannelData without an allocation", bytes: [0x4F, 0xFF, 0x00, 0x01, 0x61], reason: .noAllocation),
        Case(
            name: "first byte 0x80 (channel 0x8000) is not ChannelData", bytes: [0x80, 0x00, 0x00, 0x01, 0x61],
            reason: .notStun),
        Case(
            name: "Binding success response from a client",
            bytes: [0x01, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) },
            reason: .unexpectedMessage),
        Case(
            name: "Data indication from a client",
            bytes: [0x00, 0x17, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + (1...12).map { UInt8($0) },
            reason: .unexpectedMessage),
    ]

    @Test("A malformed or unexpected datagram gets no response and is counted by drop reason", arguments: cases)
    func droppedAndCounted(_ c: Case) throws {
        let harness = CoreHarness()
        let sent = harness.receive(c.bytes, from: CoreFixture.clientA)
        #expect(sent.isEmpty)
        #expect(harness.counters.dropped(c.reason) == 1)
        let total = DropReason.allCases.reduce(UInt64(0)) { $0 + harness.counters.dropped($1) }
        #expect(total == 1)
    }

    @Test("A correct FINGERPRINT is accepted (control for the bad-FINGERPRINT case)")
    func goodFingerprint() throws {
        let harness = CoreHarness()
        let sent = harness.receive(Self.withFingerprint(corrupt: false), from: CoreFixture.clientA)
        #expect(sent.count == 1)
    }

    @Test("Every proper prefix of a signed Allocate request is dropped as malformed, without an answer")
    func dripFeed() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        client.fingerprint = true
        try client.challenge()
        let request = try client.signedRequest(.allocate) { w in
            try w.append(RequestedTransport.udp)
            try w.append(Lifetime(seconds: 600))
        }
        for length in 0..<request.count {
            #expect(harness.receive(Array(request[0..<length]), from: CoreFixture.clientA).isEmpty)
        }
        #expect(harness.counters.dropped(.malformed) == UInt64(request.count))
        #expect(harness.core.allocationCount == 0)
        #expect(try #require(try client.send(request)).isSuccess)
    }

    @Test("ChannelData claiming more bytes than it carries is dropped even on a bound channel")
    func shortChannelDataOnBoundChannel() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(harness.receive([0x40, 0x00, 0x8A, 0xB6, 0x61, 0x62, 0x63], from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.malformed) == 1)
        #expect(harness.counters.packetsToPeer == 0)
    }
}
