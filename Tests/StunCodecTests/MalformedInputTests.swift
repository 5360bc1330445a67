import StunCodec
import Testing

/// A datagram and the exact error `StunMessage(parsing:)` must throw for it.
struct MalformedMessage: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let bytes: [UInt8]
    let error: StunDecodeError

    init(_ name: String, _ bytes: [UInt8], _ error: StunDecodeError) {
        testDescription = name
        self.bytes = bytes
        self.error = error
    }
}

/// An attribute value and the exact error its typed decoder must throw, alone and via a message.
struct MalformedAttribute: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let type: AttributeType
    let value: [UInt8]
    let error: StunDecodeError
    /// Decodes the value with the typed decoder, as `StunMessage.decode` would.
    let decode: @Sendable (UnsafeRawBufferPointer) throws(StunDecodeError) -> Void
    /// Decodes the attribute of this type from a parsed message.
    let decodeFromMessage: @Sendable (StunMessage) throws(StunDecodeError) -> Void
    /// False for the integrity attributes, whose lengths parsing itself already rejects.
    let viaMessage: Bool

    init<A: StunAttributeValue>(
        _ name: String, _: A.Type, _ value: [UInt8], _ error: StunDecodeError, viaMessage: Bool = true
    ) {
        testDescription = "\(A.self): \(name)"
        type = A.attributeType
        self.value = value
        self.error = error
        self.viaMessage = viaMessage
        decode = { (bytes) throws(StunDecodeError) in _ = try A(decoding: bytes, transactionID: testTransactionID) }
        decodeFromMessage = { (m) throws(StunDecodeError) in _ = try m.decode(A.self) }
    }
}

@Suite("Malformed input is rejected with the exact error")
struct MalformedInputTests {
    static let software = tlv(.software, Array("relayd".utf8))
    static let sampleRequest = RFC5769.request
    static let sampleResponse = RFC5769.ipv4Response

    static let messages: [MalformedMessage] = [
        MalformedMessage("empty datagram", [], .truncated),
        MalformedMessage("19 bytes", Array(rawMessage()[0..<19]), .truncated),
        MalformedMessage("top bit set (RFC 8489 §5)", [0x80] + rawMessage().dropFirst(), .notStun),
        MalformedMessage("second bit set (RFC 8489 §5)", [0x40] + rawMessage().dropFirst(), .notStun),
        MalformedMessage("bad magic cookie", rawMessage(cookie: 0x2112_A443), .badMagicCookie),
        MalformedMessage("RFC 3489 message: no cookie", rawMessage(cookie: 0x1234_5678), .badMagicCookie),
        MalformedMessage("length not a multiple of 4", rawMessage(length: 3, [1, 2, 3]), .badMessageLength),
        MalformedMessage(
            "length beyond the datagram", rawMessage(length: 8, Array(software.prefix(4))), .badMessageLength),
        MalformedMessage("datagram longer than the header says", rawMessage(length: 0, software), .badMessageLength),
        MalformedMessage(
            "attribute value runs past the end",
            rawMessage(tlv(.software, [1, 2, 3, 4], declaredLength: 8)), .attributeOverrun),
        MalformedMessage(
            "attribute padding runs past the end",
            rawMessage(tlv(.software, [1, 2, 3, 4], declaredLength: 5)), .attributeOverrun),
        MalformedMessage(
            "second attribute's value runs past the end",
            rawMessage(software + tlv(.data, [], declaredLength: 0xFFFF)), .attributeOverrun),
        MalformedMessage(
            "MESSAGE-INTEGRITY of 19 bytes",
            rawMessage(software + tlv(.messageIntegrity, [UInt8](repeating: 0, count: 19))),
            .badAttributeLength(.messageIntegrity)),
        MalformedMessage(
            "MESSAGE-INTEGRITY of 32 bytes",
            rawMessage(tlv(.messageIntegrity, [UInt8](repeating: 0, count: 32))),
            .badAttributeLength(.messageIntegrity)),
        MalformedMessage(
            "MESSAGE-INTEGRITY-SHA256 of 12 bytes",
            rawMessage(tlv(.messageIntegritySHA256, [UInt8](repeating: 0, count: 12))),
            .badAttributeLength(.messageIntegritySHA256)),
        MalformedMessage(
            "MESSAGE-INTEGRITY-SHA256 of 18 bytes",
            rawMessage(tlv(.messageIntegritySHA256, [UInt8](repeating: 0, count: 18))),
            .badAttributeLength(.messageIntegritySHA256)),
        MalformedMessage(
            "MESSAGE-INTEGRITY-SHA256 of 36 bytes",
            rawMessage(tlv(.messageIntegritySHA256, [UInt8](repeating: 0, count: 36))),
            .badAttributeLength(.messageIntegritySHA256)),
        MalformedMessage(
            "FINGERPRINT of 8 bytes", rawMessage(tlv(.fingerprint, [UInt8](repeating: 0, count: 8))),
            .badAttributeLength(.fingerprint)),
        MalformedMessage(
            "FINGERPRINT value off by one bit",
            Array(sampleRequest.dropLast()) + [sampleRequest.last! ^ 0x01], .badFingerprint),
        MalformedMessage(
            "body changed under FINGERPRINT",
            {
                var b = sampleRequest
                b[24] ^= 0x20
                return b
            }(), .badFingerprint),
        MalformedMessage(
            "transaction ID changed under FINGERPRINT",
            {
                var b = sampleResponse
                b[19] ^= 0x01
                return b
            }(), .badFingerprint),
        MalformedMessage(
            "attribute after FINGERPRINT (RFC 8489 §14.7)",
            withExtraAttribute(sampleResponse, software), .attributeAfterFingerprint),
        MalformedMessage(
            "second FINGERPRINT", withExtraAttribute(sampleResponse, Array(sampleResponse.suffix(8))),
            .attributeAfterFingerprint),
    ]

    /// `message` with `attribute` appended and the header length updated.
    static func withExtraAttribute(_ message: [UInt8], _ attribute: [UInt8]) -> [UInt8] {
        var out = message + attribute
        let length = out.count - 20
        out[2] = UInt8(length >> 8)
        out[3] = UInt8(length & 0xFF)
        return out
    }

    @Test("Malformed messages", arguments: messages)
    func malformedMessage(_ c: MalformedMessage) {
        #expect(parseError(c.bytes) == c.error)
    }

    static let longText = [UInt8](repeating: 0x61, count: 764)
    static let attributes: [MalformedAttribute] = [
        MalformedAttribute(
            "family 3", XORPeerAddress.self, [0, 3, 0, 1, 1, 2, 3, 4], .badAttributeValue(.xorPeerAddress)),
        MalformedAttribute(
            "family 0", MappedAddress.self, [0, 0, 0, 1, 1, 2, 3, 4], .badAttributeValue(.mappedAddress)),
        MalformedAttribute(
            "IPv4 with a 20-byte value", XORPeerAddress.self, [0, 1, 0, 1] + [UInt8](repeating: 0, count: 16),
            .badAttributeLength(.xorPeerAddress)),
        MalformedAttribute(
            "IPv6 with an 8-byte value", XORRelayedAddress.self, [0, 2, 0, 1, 1, 2, 3, 4],
            .badAttributeLength(.xorRelayedAddress)),
        MalformedAttribute("3 bytes", XORMappedAddress.self, [0, 1, 0], .badAttributeLength(.xorMappedAddress)),
        MalformedAttribute("empty", AlternateServer.self, [], .badAttributeLength(.alternateServer)),
        MalformedAttribute(
            "IPv4 with a 12-byte value", OtherAddress.self, [0, 1, 0, 1] + [UInt8](repeating: 0, count: 8),
            .badAttributeLength(.otherAddress)),
        MalformedAttribute("class 7", ErrorCode.self, [0, 0, 7, 0], .badAttributeValue(.errorCode)),
        MalformedAttribute("class 2", ErrorCode.self, [0, 0, 2, 99], .badAttributeValue(.errorCode)),
        MalformedAttribute("number 100", ErrorCode.self, [0, 0, 4, 100], .badAttributeValue(.errorCode)),
        MalformedAttribute("3 bytes", ErrorCode.self, [0, 0, 4], .badAttributeLength(.errorCode)),
        MalformedAttribute(
            "ill-formed UTF-8", ErrorCode.self, [0, 0, 4, 0, 0xC3, 0x28], .badAttributeValue(.errorCode)),
        MalformedAttribute(
            "764-byte reason", ErrorCode.self, [0, 0, 4, 0] + longText, .badAttributeLength(.errorCode)),
        MalformedAttribute("family 9", AddressErrorCode.self, [9, 0, 4, 40], .badAttributeValue(.addressErrorCode)),
        MalformedAttribute("class 7", AddressErrorCode.self, [1, 0, 7, 0], .badAttributeValue(.addressErrorCode)),
        MalformedAttribute("2 bytes", AddressErrorCode.self, [1, 0], .badAttributeLength(.addressErrorCode)),
        MalformedAttribute("3 bytes", Lifetime.self, [0, 0, 2], .badAttributeLength(.lifetime)),
        MalformedAttribute("8 bytes", Lifetime.self, [0, 0, 0, 0, 0, 0, 2, 88], .badAttributeLength(.lifetime)),
        MalformedAttribute("2 bytes", ChannelNumber.self, [0x40, 0x00], .badAttributeLength(.channelNumber)),
        MalformedAttribute(
            "family 3", RequestedAddressFamily.self, [3, 0, 0, 0], .badAttributeValue(.requestedAddressFamily)),
        MalformedAttribute(
            "1 byte", RequestedAddressFamily.self, [1], .badAttributeLength(.requestedAddressFamily)),
        MalformedAttribute(
            "family 0", AdditionalAddressFamily.self, [0, 0, 0, 0], .badAttributeValue(.additionalAddressFamily)),
        MalformedAttribute("1 byte", RequestedTransport.self, [17], .badAttributeLength(.requestedTransport)),
        MalformedAttribute("4 bytes", EvenPort.self, [0x80, 0, 0, 0], .badAttributeLength(.evenPort)),
        MalformedAttribute("empty", EvenPort.self, [], .badAttributeLength(.evenPort)),
        MalformedAttribute("4 bytes", DontFragment.self, [0, 0, 0, 0], .badAttributeLength(.dontFragment)),
        MalformedAttribute("4 bytes", ReservationToken.self, [1, 2, 3, 4], .badAttributeLength(.reservationToken)),
        MalformedAttribute("4 bytes", ICMP.self, [0, 0, 3, 4], .badAttributeLength(.icmp)),
        MalformedAttribute("2 bytes", ConnectionID.self, [0, 1], .badAttributeLength(.connectionID)),
        MalformedAttribute("1 byte", ChangeRequest.self, [6], .badAttributeLength(.changeRequest)),
        MalformedAttribute("2 bytes", ResponsePort.self, [0x0D, 0x96], .badAttributeLength(.responsePort)),
        MalformedAttribute("8 bytes", Priority.self, [UInt8](repeating: 1, count: 8), .badAttributeLength(.priority)),
        MalformedAttribute("1 byte", UseCandidate.self, [0], .badAttributeLength(.useCandidate)),
        MalformedAttribute("4 bytes", ICEControlling.self, [1, 2, 3, 4], .badAttributeLength(.iceControlling)),
        MalformedAttribute(
            "16 bytes", ICEControlled.self, [UInt8](repeating: 1, count: 16), .badAttributeLength(.iceControlled)),
        MalformedAttribute("764 bytes", Username.self, longText, .badAttributeLength(.username)),
        MalformedAttribute("ill-formed UTF-8", Username.self, [0x61, 0xC3, 0x28], .badAttributeValue(.username)),
        MalformedAttribute("lone continuation byte", Username.self, [0x80], .badAttributeValue(.username)),
        MalformedAttribute("overlong encoding of '/'", Username.self, [0xC0, 0xAF], .badAttributeValue(.username)),
        MalformedAttribute("UTF-16 surrogate", Username.self, [0xED, 0xA0, 0x80], .badAttributeValue(.username)),
        MalformedAttribute("31 bytes", Userhash.self, [UInt8](repeating: 0, count: 31), .badAttributeLength(.userhash)),
        MalformedAttribute("764 bytes", Realm.self, longText, .badAttributeLength(.realm)),
        MalformedAttribute(
            "128 characters", Realm.self, [UInt8](repeating: 0x61, count: 128), .badAttributeValue(.realm)),
        MalformedAttribute("truncated UTF-8", Realm.self, [0xE3, 0x83], .badAttributeValue(.realm)),
        MalformedAttribute("ill-formed UTF-8", Nonce.self, [0xFF], .badAttributeValue(.nonce)),
        MalformedAttribute("764 bytes", Nonce.self, longText, .badAttributeLength(.nonce)),
        MalformedAttribute("764 bytes", Software.self, longText, .badAttributeLength(.software)),
        MalformedAttribute(
            "ill-formed UTF-8", Software.self, [0xF8, 0x88, 0x80, 0x80, 0x80], .badAttributeValue(.software)),
        MalformedAttribute(
            "non-ASCII", AlternateDomain.self, Array("türn.example".utf8), .badAttributeValue(.alternateDomain)),
        MalformedAttribute(
            "256 bytes", AlternateDomain.self, [UInt8](repeating: 0x61, count: 256),
            .badAttributeLength(.alternateDomain)),
        MalformedAttribute("3 bytes", UnknownAttributes.self, [0, 1, 0], .badAttributeLength(.unknownAttributes)),
        MalformedAttribute(
            "parameters cut short", PasswordAlgorithms.self, [0, 1, 0, 4, 1, 2],
            .badAttributeLength(.passwordAlgorithms)),
        MalformedAttribute(
            "half an entry after a whole one", PasswordAlgorithms.self, [0, 1, 0, 0, 0, 2],
            .badAttributeLength(.passwordAlgorithms)),
        MalformedAttribute("2 bytes", PasswordAlgorithm.self, [0, 1], .badAttributeLength(.passwordAlgorithm)),
        MalformedAttribute(
            "bytes after the padded parameters", PasswordAlgorithm.self, [0, 1, 0, 1, 9, 0, 0, 0, 5],
            .badAttributeLength(.passwordAlgorithm)),
        MalformedAttribute(
            "19 bytes", MessageIntegrity.self, [UInt8](repeating: 0, count: 19),
            .badAttributeLength(.messageIntegrity), viaMessage: false),
        MalformedAttribute(
            "36 bytes", MessageIntegritySHA256.self, [UInt8](repeating: 0, count: 36),
            .badAttributeLength(.messageIntegritySHA256), viaMessage: false),
        MalformedAttribute(
            "2 bytes", Fingerprint.self, [0, 0], .badAttributeLength(.fingerprint), viaMessage: false),
    ]

    @Test("Malformed attribute values, decoded alone and from a parsed message", arguments: attributes)
    func malformedAttribute(_ c: MalformedAttribute) throws {
        let direct = c.value.withUnsafeBytes { bytes -> StunDecodeError? in
            do throws(StunDecodeError) {
                try c.decode(bytes)
                return nil
            } catch {
                return error
            }
        }
        #expect(direct == c.error)
        guard c.viaMessage else { return }
        let message = try buildMessage { w in
            try c.value.withUnsafeBytes { v in try w.append(c.type, value: v) }
        }
        try withMessage(message) { m throws in
            #expect(m.attribute(c.type) != nil)
            #expect(throws: c.error) { try c.decodeFromMessage(m) }
        }
    }

    @Test("Attributes after MESSAGE-INTEGRITY are ignored, except MESSAGE-INTEGRITY-SHA256 and FINGERPRINT")
    func attributesAfterIntegrity() throws {
        let key = Array("pass".utf8)
        let message = try buildMessage { w in
            try w.append(Username(value: "alice"))
            try key.withUnsafeBytes { k in try w.appendMessageIntegrity(key: k) }
            try w.append(Software(value: "smuggled"))
            try w.append(Username(value: "mallory"))
            try w.append(Lifetime(seconds: 0))
            try key.withUnsafeBytes { k in try w.appendMessageIntegritySHA256(key: k) }
            try w.appendFingerprint()
        }
        try withMessage(message) { m throws in
            #expect(m.ignoredAfterIntegrity == 3)
            #expect(m.attribute(.software) == nil)
            #expect(m.attribute(.lifetime) == nil)
            #expect(try m.decode(Username.self) == Username(value: "alice"))
            #expect(m.attribute(.messageIntegrity) != nil)
            #expect(m.attribute(.messageIntegritySHA256) != nil)
            #expect(m.attribute(.fingerprint) != nil)
            #expect(m.contains(.messageIntegrity))
            #expect(m.verifyIntegrity(key: key) == .valid)
            #expect(Array(m.attributes.map(\.type)) == [.username])
            #expect(m.allAttributes.map(\.type).count == 7)
        }
    }

    @Test("Attributes after a lone MESSAGE-INTEGRITY-SHA256 are ignored too")
    func attributesAfterSHA256() throws {
        let key = Array("pass".utf8)
        let message = try buildMessage { w in
            try w.append(Realm(value: "r"))
            try key.withUnsafeBytes { k in try w.appendMessageIntegritySHA256(key: k, length: 16) }
            try w.append(Realm(value: "other"))
            try key.withUnsafeBytes { k in try w.appendMessageIntegrity(key: k) }
        }
        try withMessage(message) { m throws in
            #expect(m.ignoredAfterIntegrity == 2, "a MESSAGE-INTEGRITY after MESSAGE-INTEGRITY-SHA256 is ignored")
            #expect(m.integrityOffset == nil)
            #expect(try m.decode(Realm.self) == Realm(value: "r"))
            #expect(m.verifyIntegrity(key: key) == .valid)
        }
    }

    @Test("Later duplicates of an attribute are ignored (RFC 8489 §14)")
    func duplicates() throws {
        let message = rawMessage(tlv(.lifetime, [0, 0, 0, 1]) + tlv(.lifetime, [0, 0, 0, 2]))
        try withMessage(message) { m throws in #expect(try m.decode(Lifetime.self) == Lifetime(seconds: 1)) }
    }

    static let channelData: [MalformedMessage] = [
        MalformedMessage("3 bytes", [0x40, 0x00, 0x00], .truncated),
        MalformedMessage("channel 0x3FFF", [0x3F, 0xFF, 0x00, 0x00], .badChannelNumber),
        MalformedMessage("channel 0x8000", [0x80, 0x00, 0x00, 0x00], .badChannelNumber),
        MalformedMessage("channel 0x0000", [0x00, 0x00, 0x00, 0x00], .badChannelNumber),
        MalformedMessage("channel 0xFFFF", [0xFF, 0xFF, 0x00, 0x00], .badChannelNumber),
        MalformedMessage("claims 35,510 bytes, carries 3", [0x40, 0x00, 0x8A, 0xB6, 1, 2, 3], .badChannelDataLength),
        MalformedMessage("claims 4 bytes, carries 3", [0x40, 0x00, 0x00, 0x04, 1, 2, 3], .badChannelDataLength),
        MalformedMessage(
            "4 bytes after 1 byte of data: more than padding", [0x40, 0x00, 0x00, 0x01, 1, 0, 0, 0, 0],
            .badChannelDataLength),
        MalformedMessage(
            "any byte after 4-aligned data", [0x40, 0x00, 0x00, 0x04, 1, 2, 3, 4, 0], .badChannelDataLength),
    ]

    @Test("Malformed ChannelData over UDP", arguments: channelData)
    func malformedChannelData(_ c: MalformedMessage) {
        #expect(throws: c.error) {
            try c.bytes.withUnsafeBytes { bytes in _ = try ChannelDataMessage(parsing: bytes) }
        }
    }
}
