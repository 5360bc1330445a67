import Testing
import StunCodec

@Suite("RFC 5769 test vectors")
struct RFC5769Tests {
    @Test("§2.1 request parses; integrity and fingerprint verify")
    func sampleRequest() throws {
        try RFC5769.request.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.type == .bindingRequest)
            #expect(m.transactionID.description == "b7e7a701bc34d686fa87dfae")
            #expect(m.fingerprintOffset != nil)
            #expect(m.verifyIntegrity(key: RFC5769.shortTermPassword) == .valid)
            let username = try #require(m.attribute(.username))
            #expect(Array(username.value) == Array("evtj:h6vY".utf8))
            #expect(m.contains(.software))
            #expect(m.contains(.priority))
            #expect(m.contains(.iceControlled))
        }
    }

    @Test("§2.1 with a wrong password fails integrity")
    func sampleRequestWrongKey() throws {
        try RFC5769.request.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.verifyIntegrity(key: Array("VOkJxbRl1RmTxUk/WvJxBu".utf8)) == .invalid)
        }
    }

    @Test("§2.2 IPv4 response: XOR-MAPPED-ADDRESS 192.0.2.1:32853")
    func ipv4Response() throws {
        try RFC5769.ipv4Response.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.type == .bindingSuccess)
            #expect(m.verifyIntegrity(key: RFC5769.shortTermPassword) == .valid)
            let mapped = try #require(try m.decode(XORMappedAddress.self))
            #expect(mapped.address == TransportAddress("192.0.2.1:32853"))
        }
    }

    @Test("§2.3 IPv6 response: XOR-MAPPED-ADDRESS [2001:db8:1234:5678:11:2233:4455:6677]:32853")
    func ipv6Response() throws {
        try RFC5769.ipv6Response.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.verifyIntegrity(key: RFC5769.shortTermPassword) == .valid)
            let mapped = try #require(try m.decode(XORMappedAddress.self))
            #expect(mapped.address == TransportAddress("[2001:db8:1234:5678:11:2233:4455:6677]:32853"))
        }
    }

    @Test("§2.4 long-term request verifies with MD5(username:realm:password)")
    func longTermRequest() throws {
        try RFC5769.longTermRequest.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.fingerprintOffset == nil)
            #expect(m.verifyIntegrity(key: RFC5769.longTermKey) == .valid)
            let realm = try #require(try m.decode(Realm.self))
            #expect(realm.value == RFC5769.longTermRealm)
            let username = try #require(try m.decode(Username.self))
            #expect(username.value == RFC5769.longTermUsername)
            let nonce = try #require(try m.decode(Nonce.self))
            #expect(nonce.value == "f//499k954d6OL34oL9FSTvy64sA")
        }
    }

    @Test("Re-encoding each vector's attributes reproduces its bytes", arguments: RFC5769.all)
    func reencode(vector: (name: String, bytes: [UInt8])) throws {
        var out = [UInt8](repeating: 0xEE, count: 256)
        let written = try vector.bytes.withUnsafeBytes { bytes -> [UInt8] in
            let m = try StunMessage(parsing: bytes)
            return try out.withUnsafeMutableBytes { buffer in
                var w = try StunMessageWriter(into: buffer, type: m.type, transactionID: m.transactionID)
                var it = m.allAttributes
                while let a = it.next() {
                    switch a.type {
                    case .messageIntegrity:
                        let key = vector.name.hasPrefix("2.4") ? RFC5769.longTermKey : RFC5769.shortTermPassword
                        try w.appendMessageIntegrity(key: key)
                    case .fingerprint:
                        try w.appendFingerprint()
                    default:
                        // Padding bytes in the vectors are 0x20 for USERNAME/SOFTWARE; copy them as received.
                        let padded = (a.value.count + 3) & ~3
                        let start = a.offset + 4
                        try w.appendAttribute(a.type, length: a.value.count) { v in
                            v.copyMemory(from: a.value)
                        }
                        for i in 0..<(padded - a.value.count) {
                            buffer[w.count - (padded - a.value.count) + i] = bytes[start + a.value.count + i]
                        }
                    }
                }
                return Array(w.bytes)
            }
        }
        #expect(written == vector.bytes)
    }
}
