import StunCodec
import Testing

/// A typed value to send through encode → decode → encode, alone and inside a whole message.
struct RoundTripCase: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let check: @Sendable () throws -> Void

    init<A: StunAttributeValue & Equatable>(_ value: A, _ label: String = "", inMessage: Bool = true) {
        testDescription = "\(A.self)" + (label.isEmpty ? "" : " \(label)")
        check = { try roundTrip(value, inMessage: inMessage) }
    }
}

/// Encodes `value` into a buffer prefilled with junk, decodes it, re-encodes the result into
/// other junk: both decode and encode must be exact. Then writes it with `StunMessageWriter`,
/// parses the message and decodes the attribute from it.
func roundTrip<A: StunAttributeValue & Equatable>(_ value: A, inMessage: Bool) throws {
    let id = testTransactionID
    var wire = [UInt8](repeating: 0xEE, count: value.encodedLength)
    wire.withUnsafeMutableBytes { value.encode(into: $0, transactionID: id) }
    let decoded = try wire.withUnsafeBytes { try A(decoding: $0, transactionID: id) }
    #expect(decoded == value)
    var again = [UInt8](repeating: 0x11, count: decoded.encodedLength)
    again.withUnsafeMutableBytes { decoded.encode(into: $0, transactionID: id) }
    #expect(again == wire)

    guard inMessage else { return }
    let message = try buildMessage { try $0.append(value) }
    #expect(message.count == 20 + 4 + (wire.count + 3) & ~3)
    try withMessage(message) { m throws in
        #expect(try m.decode(A.self) == value)
        let raw = try #require(m.attribute(A.attributeType))
        #expect(Array(raw.value) == wire)
    }
}

/// Wire bytes that must decode to `expected` and encode back to `canonical` (the same bytes
/// unless ignored bits were set).
struct WireCase: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let check: @Sendable () throws -> Void

    init<A: StunAttributeValue & Equatable>(
        _ name: String, _ bytes: [UInt8], _ expected: A, canonical: [UInt8]? = nil
    ) {
        testDescription = name
        check = {
            let decoded = try bytes.withUnsafeBytes { try A(decoding: $0, transactionID: testTransactionID) }
            #expect(decoded == expected)
            var encoded = [UInt8](repeating: 0xEE, count: decoded.encodedLength)
            encoded.withUnsafeMutableBytes { decoded.encode(into: $0, transactionID: testTransactionID) }
            #expect(encoded == (canonical ?? bytes))
            let redecoded = try encoded.withUnsafeBytes { try A(decoding: $0, transactionID: testTransactionID) }
            #expect(redecoded == expected)
        }
    }
}

@Suite("Attribute round trips")
struct AttributeRoundTripTests {
    static let addresses: [(label: String, address: TransportAddress)] = [
        ("IPv4", address("192.0.2.1:32853")),
        ("IPv6", address("[2001:db8:1234:5678:11:2233:4455:6677]:32853")),
        ("IPv4 any, port 0", address("0.0.0.0:0")),
        ("IPv4 all ones", address("255.255.255.255:65535")),
        ("IPv6 any, port 0", address("[::]:0")),
        ("IPv6 all ones", address("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")),
        ("IPv4-mapped IPv6", address("[::ffff:198.51.100.7]:3478")),
    ]

    static let addressCases: [RoundTripCase] = addresses.flatMap { (label, a) in
        [
            RoundTripCase(MappedAddress(address: a), label),
            RoundTripCase(XORMappedAddress(address: a), label),
            RoundTripCase(XORPeerAddress(address: a), label),
            RoundTripCase(XORRelayedAddress(address: a), label),
            RoundTripCase(AlternateServer(address: a), label),
            RoundTripCase(ResponseOrigin(address: a), label),
            RoundTripCase(OtherAddress(address: a), label),
        ]
    }

    static let valueCases: [RoundTripCase] =
        [
            RoundTripCase(Username(value: "evtj:h6vY")),
            RoundTripCase(Username(value: RFC5769.longTermUsername), "katakana"),
            RoundTripCase(Username(value: ""), "empty"),
            RoundTripCase(Username(value: String(repeating: "u", count: Username.maxDecodedBytes)), "763 bytes"),
            RoundTripCase(Userhash(bytes: Array(0..<32))),
            RoundTripCase(Realm(value: "example.org")),
            RoundTripCase(Realm(value: String(repeating: "é", count: 127)), "127 characters"),
            RoundTripCase(Nonce(value: "f//499k954d6OL34oL9FSTvy64sA")),
            RoundTripCase(Software(value: "relayd 0.1")),
            RoundTripCase(Software(value: ""), "empty"),
            RoundTripCase(AlternateDomain(value: "turn.example.org")),
            RoundTripCase(ErrorCode(code: 699, reason: ""), "699, empty reason"),
            RoundTripCase(ErrorCode(code: 300, reason: "ünïcödé"), "UTF-8 reason"),
            RoundTripCase(UnknownAttributes(types: []), "empty"),
            RoundTripCase(UnknownAttributes(types: [.lifetime]), "one"),
            RoundTripCase(UnknownAttributes(types: [.lifetime, AttributeType(rawValue: 0x7FFF), .data]), "three"),
            RoundTripCase(PasswordAlgorithms(algorithms: [.md5, .sha256])),
            RoundTripCase(PasswordAlgorithms(algorithms: []), "empty"),
            RoundTripCase(
                PasswordAlgorithms(algorithms: [
                    PasswordAlgorithm(algorithm: 0x1234, parameters: [1, 2, 3]), .sha256,
                    PasswordAlgorithm(algorithm: 9, parameters: [1, 2, 3, 4, 5]),
                ]), "with parameters"),
            RoundTripCase(PasswordAlgorithm.md5),
            RoundTripCase(PasswordAlgorithm.sha256),
            RoundTripCase(PasswordAlgorithm(algorithm: 0xFFFF, parameters: [9, 8, 7]), "with parameters"),
            RoundTripCase(MessageIntegrity(bytes: Array(100..<120))),
            RoundTripCase(MessageIntegritySHA256(bytes: Array(0..<16)), "16"),
            RoundTripCase(MessageIntegritySHA256(bytes: Array(0..<20)), "20"),
            RoundTripCase(MessageIntegritySHA256(bytes: Array(0..<24)), "24"),
            RoundTripCase(MessageIntegritySHA256(bytes: Array(0..<28)), "28"),
            RoundTripCase(MessageIntegritySHA256(bytes: Array(0..<32)), "32"),
            // A made-up FINGERPRINT cannot ride in a message: parsing checks it. IntegrityTests decode a real one.
            RoundTripCase(Fingerprint(value: 0xDEAD_BEEF), inMessage: false),
            RoundTripCase(ChannelNumber(value: 0x4000)),
            RoundTripCase(ChannelNumber(value: 0x4FFF)),
            RoundTripCase(Lifetime(seconds: 0), "0"),
            RoundTripCase(Lifetime(seconds: 600), "600"),
            RoundTripCase(Lifetime(seconds: .max), "max"),
            RoundTripCase(DataAttribute(bytes: []), "empty"),
            RoundTripCase(DataAttribute(bytes: [1, 2, 3]), "3 bytes"),
            RoundTripCase(DataAttribute(bytes: [UInt8](repeating: 0xAB, count: 1500)), "1500 bytes"),
            RoundTripCase(RequestedAddressFamily(family: .ipv4), "IPv4"),
            RoundTripCase(RequestedAddressFamily(family: .ipv6), "IPv6"),
            RoundTripCase(EvenPort(reservePair: true), "R"),
            RoundTripCase(EvenPort(reservePair: false), "no R"),
            RoundTripCase(RequestedTransport.udp, "UDP"),
            RoundTripCase(RequestedTransport.tcp, "TCP"),
            RoundTripCase(DontFragment()),
            RoundTripCase(ReservationToken(value: 0x0102_0304_0506_0708)),
            RoundTripCase(AdditionalAddressFamily(family: .ipv6)),
            RoundTripCase(AddressErrorCode(family: .ipv6, error: .addressFamilyNotSupported), "440"),
            RoundTripCase(AddressErrorCode(family: .ipv4, code: 508, reason: "Insufficient Capacity"), "508"),
            RoundTripCase(ICMP(type: 3, code: 4, errorData: 1400), "fragmentation needed"),
            RoundTripCase(ICMP(type: 255, code: 255, errorData: .max), "all ones"),
            RoundTripCase(MobilityTicket(bytes: []), "asked for"),
            RoundTripCase(MobilityTicket(bytes: Array(0..<41)), "issued"),
            RoundTripCase(ConnectionID(value: 0xCAFE_BABE)),
            RoundTripCase(ChangeRequest(changeIP: false, changePort: false), "none"),
            RoundTripCase(ChangeRequest(changeIP: true, changePort: false), "IP"),
            RoundTripCase(ChangeRequest(changeIP: false, changePort: true), "port"),
            RoundTripCase(ChangeRequest(changeIP: true, changePort: true), "both"),
            RoundTripCase(ResponsePort(port: 3478)),
            RoundTripCase(Padding(count: 0), "empty"),
            RoundTripCase(Padding(count: 5), "5 bytes"),
            RoundTripCase(Padding(bytes: [UInt8](repeating: 0, count: 64)), "64 bytes"),
            RoundTripCase(Priority(value: 0x6E00_01FF)),
            RoundTripCase(UseCandidate()),
            RoundTripCase(ICEControlled(tieBreaker: 0x932F_F9B1_5126_3B36)),
            RoundTripCase(ICEControlling(tieBreaker: 1)),
        ] + ErrorCode.known.map { RoundTripCase($0, "\($0.code)") }

    @Test("Address attributes: encode → decode → encode, alone and in a message", arguments: addressCases)
    func addressRoundTrip(_ c: RoundTripCase) throws { try c.check() }

    @Test("Other attributes: encode → decode → encode, alone and in a message", arguments: valueCases)
    func valueRoundTrip(_ c: RoundTripCase) throws { try c.check() }

    static let wireCases: [WireCase] = [
        WireCase(
            "XOR-MAPPED-ADDRESS of RFC 5769 §2.2", hex("00 01 a1 47 e1 12 a6 43"),
            XORMappedAddress(address: address("192.0.2.1:32853"))),
        WireCase(
            "XOR-MAPPED-ADDRESS of RFC 5769 §2.3",
            hex("00 02 a1 47 01 13 a9 fa a5 d3 f1 79 bc 25 f4 b5 be d2 b9 d9"),
            XORMappedAddress(address: address("[2001:db8:1234:5678:11:2233:4455:6677]:32853"))),
        WireCase(
            "MAPPED-ADDRESS IPv4 in plain form", hex("00 01 80 55 c0 00 02 01"),
            MappedAddress(address: address("192.0.2.1:32853"))),
        WireCase(
            "MAPPED-ADDRESS IPv6 in plain form",
            hex("00 02 0d 96 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01"),
            MappedAddress(address: address("[2001:db8::1]:3478"))),
        WireCase(
            "MAPPED-ADDRESS: a nonzero first byte is ignored (RFC 8489 §14.1)", hex("ff 01 80 55 c0 00 02 01"),
            MappedAddress(address: address("192.0.2.1:32853")), canonical: hex("00 01 80 55 c0 00 02 01")),
        WireCase("SOFTWARE of RFC 5769 §2.1", Array("STUN test client".utf8), Software(value: "STUN test client")),
        WireCase("USERNAME of RFC 5769 §2.1", Array("evtj:h6vY".utf8), Username(value: "evtj:h6vY")),
        WireCase("PRIORITY of RFC 5769 §2.1", hex("6e 00 01 ff"), Priority(value: 0x6E00_01FF)),
        WireCase(
            "ICE-CONTROLLED of RFC 5769 §2.1", hex("93 2f f9 b1 51 26 3b 36"),
            ICEControlled(tieBreaker: 0x932F_F9B1_5126_3B36)),
        WireCase(
            "ERROR-CODE 401", [0, 0, 4, 1] + Array("Unauthenticated".utf8), ErrorCode.unauthenticated),
        WireCase(
            "ERROR-CODE: reserved bits are ignored (RFC 8489 §14.8)",
            [0xFF, 0xFF, 0xFC, 38] + Array("Stale Nonce".utf8),
            ErrorCode.staleNonce, canonical: [0, 0, 4, 38] + Array("Stale Nonce".utf8)),
        WireCase("LIFETIME 600", hex("00 00 02 58"), Lifetime(seconds: 600)),
        WireCase("REQUESTED-TRANSPORT UDP", hex("11 00 00 00"), RequestedTransport.udp),
        WireCase(
            "REQUESTED-TRANSPORT: RFFU bits are ignored", hex("06 ff ff ff"), RequestedTransport.tcp,
            canonical: hex("06 00 00 00")),
        WireCase("CHANNEL-NUMBER 0x4000", hex("40 00 00 00"), ChannelNumber(value: 0x4000)),
        WireCase(
            "CHANNEL-NUMBER: RFFU bits are ignored (RFC 8656 §18.1)", hex("40 01 ff ff"), ChannelNumber(value: 0x4001),
            canonical: hex("40 01 00 00")),
        WireCase("EVEN-PORT with R", hex("80"), EvenPort(reservePair: true)),
        WireCase("EVEN-PORT: RFFU bits are ignored", hex("7f"), EvenPort(reservePair: false), canonical: hex("00")),
        WireCase("REQUESTED-ADDRESS-FAMILY IPv6", hex("02 00 00 00"), RequestedAddressFamily(family: .ipv6)),
        WireCase("CHANGE-REQUEST A and B", hex("00 00 00 06"), ChangeRequest(changeIP: true, changePort: true)),
        WireCase("RESPONSE-PORT 3478", hex("0d 96 00 00"), ResponsePort(port: 3478)),
        WireCase(
            "UNKNOWN-ATTRIBUTES with an odd count", hex("00 0d 00 13 80 2a"),
            UnknownAttributes(types: [.lifetime, .data, .iceControlling])),
        WireCase(
            "PASSWORD-ALGORITHMS MD5 and SHA-256", hex("00 01 00 00 00 02 00 00"),
            PasswordAlgorithms(algorithms: [.md5, .sha256])),
        WireCase(
            "PASSWORD-ALGORITHMS: parameters padded to 4", hex("00 07 00 03 aa bb cc 00 00 02 00 00"),
            PasswordAlgorithms(algorithms: [PasswordAlgorithm(algorithm: 7, parameters: [0xAA, 0xBB, 0xCC]), .sha256])),
        WireCase(
            "PASSWORD-ALGORITHMS: padding left off the last entry is accepted", hex("00 07 00 03 aa bb cc"),
            PasswordAlgorithms(algorithms: [PasswordAlgorithm(algorithm: 7, parameters: [0xAA, 0xBB, 0xCC])]),
            canonical: hex("00 07 00 03 aa bb cc 00")),
        WireCase(
            "PASSWORD-ALGORITHM: padding inside the value is accepted", hex("00 07 00 03 aa bb cc 00"),
            PasswordAlgorithm(algorithm: 7, parameters: [0xAA, 0xBB, 0xCC]), canonical: hex("00 07 00 03 aa bb cc")),
        WireCase(
            "ADDRESS-ERROR-CODE IPv6 440", [2, 0, 4, 40] + Array("Address Family not Supported".utf8),
            AddressErrorCode(family: .ipv6, error: .addressFamilyNotSupported)),
        WireCase("ICMP port unreachable", hex("00 00 03 03 00 00 00 00"), ICMP(type: 3, code: 3, errorData: 0)),
    ]

    @Test("Known wire bytes: decode → encode → decode", arguments: wireCases)
    func wireRoundTrip(_ c: WireCase) throws { try c.check() }

    @Test("Every attribute of the RFC 5769 §2.1 request decodes to its typed value")
    func rfc5769RequestTyped() throws {
        try withMessage(RFC5769.request) { m throws in
            #expect(try m.decode(Software.self) == Software(value: "STUN test client"))
            #expect(try m.decode(Priority.self) == Priority(value: 0x6E00_01FF))
            #expect(try m.decode(ICEControlled.self) == ICEControlled(tieBreaker: 0x932F_F9B1_5126_3B36))
            #expect(try m.decode(Username.self) == Username(value: "evtj:h6vY"))
            #expect(
                try m.decode(MessageIntegrity.self)
                    == MessageIntegrity(bytes: hex("9a eaa70c bfd8cb56 781ef2b5 b2d3f249 c1b571a2")))
            #expect(try m.decode(Fingerprint.self) == Fingerprint(value: 0xE57A_3BCF))
            #expect(try m.decode(ICEControlling.self) == nil)
        }
    }

    @Test("XOR coding of IPv6 depends on the transaction ID; of IPv4 only on the cookie")
    func xorUsesTransactionID() throws {
        let other = TransactionID(high: 1, low: 2)
        for (a, dependsOnID) in [(address("[2001:db8::1]:5000"), true), (address("203.0.113.9:5000"), false)] {
            let value = XORPeerAddress(address: a)
            var wire = [UInt8](repeating: 0, count: value.encodedLength)
            wire.withUnsafeMutableBytes { value.encode(into: $0, transactionID: testTransactionID) }
            let decoded = try wire.withUnsafeBytes { try XORPeerAddress(decoding: $0, transactionID: other) }
            #expect((decoded.address != a) == dependsOnID)
            #expect(decoded.address.port == a.port)
        }
    }

    @Test(
        "Every attribute in one message, then integrity and fingerprint, parses back",
        arguments: [
            address("198.51.100.20:49152"), address("[2001:db8:85a3::8a2e:370:7334]:49152"),
        ])
    func allInOneMessage(_ a: TransportAddress) throws {
        let key = Array("secret key".utf8)
        let values: [any StunAttributeValue] = [
            MappedAddress(address: a), XORMappedAddress(address: a), XORPeerAddress(address: a),
            XORRelayedAddress(address: a), AlternateServer(address: a), ResponseOrigin(address: a),
            OtherAddress(address: a), Username(value: "1700000000:alice"), Realm(value: "relayd.example"),
            Nonce(value: "obMatJos2AAACf//499k954d6OL34oL9FSTvy64sA"), Software(value: "relayd"),
            AlternateDomain(value: "turn2.relayd.example"), ErrorCode.staleNonce,
            UnknownAttributes(types: [AttributeType(rawValue: 0x7F00)]),
            PasswordAlgorithms(algorithms: [.sha256, .md5]),
            PasswordAlgorithm.sha256, Userhash(bytes: [UInt8](repeating: 7, count: 32)), ChannelNumber(value: 0x4123),
            Lifetime(seconds: 3600), DataAttribute(bytes: Array("hello peer".utf8)),
            RequestedAddressFamily(family: a.ip.family), EvenPort(reservePair: true), RequestedTransport.udp,
            DontFragment(), ReservationToken(value: 42), AdditionalAddressFamily(family: .ipv6),
            AddressErrorCode(family: .ipv4, error: .insufficientCapacity), ICMP(type: 1, code: 4, errorData: 1280),
            MobilityTicket(bytes: Array(repeating: 0xA5, count: 41)),
            ConnectionID(value: 77), ChangeRequest(changeIP: true, changePort: false), ResponsePort(port: 40000),
            Padding(count: 7), Priority(value: 1_853_759_999), UseCandidate(), ICEControlling(tieBreaker: .max),
        ]
        let types = values.map { type(of: $0).attributeType }
        #expect(Set(types).count == types.count, "one attribute of each type")
        let message = try buildMessage(MessageType(method: .allocate, messageClass: .request)) { w in
            for v in values { try append(v, to: &w) }
            try key.withUnsafeBytes { k in
                try w.appendMessageIntegrity(key: k)
                try w.appendMessageIntegritySHA256(key: k)
            }
            try w.appendFingerprint()
        }
        try withMessage(message) { m throws in
            #expect(m.type == MessageType(method: .allocate, messageClass: .request))
            #expect(m.verifyIntegrity(key: key) == .valid)
            #expect(m.ignoredAfterIntegrity == 0)
            for v in values { try expectDecodes(v, from: m) }
            #expect(Array(m.attributes.map(\.type)) == types)
            #expect(
                Array(m.allAttributes.map(\.type))
                    == types + [.messageIntegrity, .messageIntegritySHA256, .fingerprint])
        }
    }

    @Test("Unknown attributes stay raw and are re-emitted byte for byte")
    func unknownAttributeSurvives() throws {
        let unknownRequired = AttributeType(rawValue: 0x7ABC)
        let unknownOptional = AttributeType(rawValue: 0xC0DE)
        let original = rawMessage(tlv(unknownRequired, [1, 2, 3]) + tlv(unknownOptional, Array(0..<9)))
        let copy = try withMessage(original) { m throws in
            #expect(m.attribute(unknownRequired)?.type.isComprehensionRequired == true)
            #expect(m.attribute(unknownOptional)?.type.isComprehensionRequired == false)
            return try buildMessage(m.type, transactionID: m.transactionID) { w in
                for a in m.attributes { try w.append(a.type, value: a.value) }
            }
        }
        #expect(copy == original)
    }
}

/// Opens the existential so the writer sees the concrete attribute type.
private func append<A: StunAttributeValue>(_ value: A, to writer: inout StunMessageWriter) throws {
    try writer.append(value)
}

/// Decodes `A` from `message` and compares it with `value` by their encodings.
private func expectDecodes<A: StunAttributeValue>(_ value: A, from message: StunMessage) throws {
    let decoded = try #require(try message.decode(A.self), "\(A.self) present")
    #expect(encoding(decoded) == encoding(value), "\(A.self)")
}

private func encoding<A: StunAttributeValue>(_ value: A) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: value.encodedLength)
    out.withUnsafeMutableBytes { value.encode(into: $0, transactionID: testTransactionID) }
    return out
}
