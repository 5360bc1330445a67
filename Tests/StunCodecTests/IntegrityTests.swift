import StunCodec
import Testing

@Suite("MESSAGE-INTEGRITY, MESSAGE-INTEGRITY-SHA256 and FINGERPRINT (RFC 8489 §14.5–14.7)")
struct IntegrityTests {
    static let key = KeyDerivation.longTermKeyMD5(username: "alice", realm: "example.org", password: "s3cret")
    static let otherKey = KeyDerivation.longTermKeyMD5(username: "alice", realm: "example.org", password: "s3creT")

    /// An authenticated Allocate request: MESSAGE-INTEGRITY, then MESSAGE-INTEGRITY-SHA256 of
    /// `sha256Length` bytes (nil: none), then FINGERPRINT when asked.
    static func request(sha256Length: Int?, sha1: Bool = true, fingerprint: Bool = true) throws -> [UInt8] {
        try buildMessage(MessageType(method: .allocate, messageClass: .request)) { w in
            try w.append(RequestedTransport.udp)
            try w.append(Username(value: "alice"))
            try w.append(Realm(value: "example.org"))
            try w.append(Nonce(value: "obMatJos2AAACf//499k954d6OL34oL9FSTvy64sA"))
            try w.append(Software(value: "relayd tests"))
            try key.withUnsafeBytes { k in
                if sha1 { try w.appendMessageIntegrity(key: k) }
                if let sha256Length { try w.appendMessageIntegritySHA256(key: k, length: sha256Length) }
            }
            if fingerprint { try w.appendFingerprint() }
        }
    }

    @Test(
        "MESSAGE-INTEGRITY + MESSAGE-INTEGRITY-SHA256 + FINGERPRINT verify with the key, fail with another",
        arguments: [16, 20, 24, 28, 32])
    func bothIntegrities(sha256Length: Int) throws {
        let bytes = try Self.request(sha256Length: sha256Length)
        try withMessage(bytes) { m throws in
            #expect(m.integrityOffset != nil)
            #expect(m.integritySHA256Offset != nil)
            #expect(m.fingerprintOffset == bytes.count - 8)
            #expect(m.verifyIntegrity(key: Self.key) == .valid)
            #expect(m.verifyIntegrity(key: Self.otherKey) == .invalid)
            #expect(m.verifyIntegrity(key: []) == .invalid)
            #expect(try m.decode(MessageIntegritySHA256.self)?.bytes.count == sha256Length)
            #expect(try m.decode(MessageIntegrity.self)?.bytes.count == 20)
        }
    }

    @Test(
        "Each integrity attribute alone verifies", arguments: [(true, nil), (false, 32), (false, 16)] as [(Bool, Int?)])
    func singleIntegrity(sha1: Bool, sha256Length: Int?) throws {
        let bytes = try Self.request(sha256Length: sha256Length, sha1: sha1, fingerprint: false)
        try withMessage(bytes) { m throws in
            #expect(m.verifyIntegrity(key: Self.key) == .valid)
            #expect(m.verifyIntegrity(key: Self.otherKey) == .invalid)
        }
    }

    @Test("FINGERPRINT is the CRC-32 of the message before it, XOR 0x5354554E")
    func fingerprintValue() throws {
        let bytes = try Self.request(sha256Length: nil)
        let covered = Array(bytes.dropLast(8))
        let crc = covered.withUnsafeBytes { CRC32.checksum($0) } ^ StunConstants.fingerprintXOR
        try withMessage(bytes) { m throws in #expect(try m.decode(Fingerprint.self) == Fingerprint(value: crc)) }
    }

    @Test("Tampering with any byte under FINGERPRINT makes parsing throw", arguments: [nil, 32] as [Int?])
    func tamperingWithFingerprint(sha256Length: Int?) throws {
        let bytes = try Self.request(sha256Length: sha256Length)
        let fingerprintType = (bytes.count - 8)...(bytes.count - 7)
        for i in bytes.indices {
            var tampered = bytes
            tampered[i] ^= 0x01
            if fingerprintType.contains(i) {
                // FINGERPRINT's own type changed: an unknown trailing attribute, no FINGERPRINT.
                try withMessage(tampered) { m throws in #expect(m.fingerprintOffset == nil) }
            } else {
                #expect(parseError(tampered) != nil, "a flipped bit at offset \(i) went unnoticed")
            }
        }
    }

    @Test("Tampering with any byte of an integrity-protected message never verifies", arguments: [nil, 24] as [Int?])
    func tamperingWithoutFingerprint(sha256Length: Int?) throws {
        let bytes = try Self.request(sha256Length: sha256Length, fingerprint: false)
        let sha256Offset = try withMessage(bytes) { m throws in m.integritySHA256Offset }
        for i in bytes.indices {
            var tampered = bytes
            tampered[i] ^= 0x01
            guard parseError(tampered) == nil else { continue }
            try withMessage(tampered) { m throws in
                if let sha256Offset, i == sha256Offset || i == sha256Offset + 1 {
                    // MESSAGE-INTEGRITY-SHA256's type changed: it becomes an ignored attribute after
                    // MESSAGE-INTEGRITY, which still covers every attribute that counts.
                    #expect(m.integritySHA256Offset == nil && m.ignoredAfterIntegrity == 1)
                } else {
                    #expect(m.verifyIntegrity(key: Self.key) != .valid, "a flipped bit at offset \(i) still verified")
                }
            }
        }
    }

    @Test("A changed SOFTWARE value gives .invalid")
    func tamperedBodyIsInvalid() throws {
        var bytes = try Self.request(sha256Length: 32, fingerprint: false)
        let offset = try withMessage(bytes) { m throws in try #require(m.attribute(.software)).offset + 4 }
        bytes[offset] ^= 0x20
        try withMessage(bytes) { m throws in #expect(m.verifyIntegrity(key: Self.key) == .invalid) }
    }

    @Test("No integrity attribute: .absent")
    func absent() throws {
        let bytes = try Self.request(sha256Length: nil, sha1: false)
        try withMessage(bytes) { m throws in #expect(m.verifyIntegrity(key: Self.key) == .absent) }
        try withMessage(rawMessage()) { m throws in #expect(m.verifyIntegrity(key: Self.key) == .absent) }
    }

    @Test("MESSAGE-INTEGRITY-SHA256 truncation outside 16–32 in steps of 4 is refused", arguments: [0, 12, 18, 30, 36])
    func badTruncation(length: Int) throws {
        #expect(throws: StunEncodeError.badIntegrityLength) {
            _ = try buildMessage { w in
                try Self.key.withUnsafeBytes { k in try w.appendMessageIntegritySHA256(key: k, length: length) }
            }
        }
    }

    @Test("Integrity or fingerprint that would push the message past 65,535 bytes throws instead of trapping")
    func messageLengthLimit() throws {
        // 4 + 65,520 bytes of DATA: room for FINGERPRINT (8) but not MESSAGE-INTEGRITY (24).
        let data = [UInt8](repeating: 0, count: 65_520)
        #expect(throws: StunEncodeError.valueTooLong) {
            _ = try buildMessage(capacity: 70_000) { w in
                try data.withUnsafeBytes { d in try w.append(.data, value: d) }
                try Self.key.withUnsafeBytes { k in try w.appendMessageIntegrity(key: k) }
            }
        }
        let full = try buildMessage(capacity: 70_000) { w in
            try data.withUnsafeBytes { d in try w.append(.data, value: d) }
            try w.appendFingerprint()
        }
        #expect(full.count == 20 + 65_532)
        #expect(parseError(full) == nil)
        let data2 = [UInt8](repeating: 0, count: 65_528)
        #expect(throws: StunEncodeError.valueTooLong) {
            _ = try buildMessage(capacity: 70_000) { w in
                try data2.withUnsafeBytes { d in try w.append(.data, value: d) }
                try w.appendFingerprint()
            }
        }
    }

    @Test("A buffer too small for the next attribute throws .bufferTooSmall")
    func bufferTooSmall() {
        #expect(throws: StunEncodeError.bufferTooSmall) {
            _ = try buildMessage(capacity: 19) { _ in }
        }
        #expect(throws: StunEncodeError.bufferTooSmall) {
            _ = try buildMessage(capacity: 40) { w in
                try Self.key.withUnsafeBytes { try w.appendMessageIntegrity(key: $0) }
            }
        }
        #expect(throws: StunEncodeError.bufferTooSmall) {
            _ = try buildMessage(capacity: 27) { w in try w.appendFingerprint() }
        }
        #expect(throws: StunEncodeError.bufferTooSmall) {
            _ = try buildMessage(capacity: 31) { w in try w.append(XORMappedAddress(address: address("192.0.2.1:1"))) }
        }
    }
}
