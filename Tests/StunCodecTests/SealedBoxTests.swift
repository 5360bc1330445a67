import StunCodec
import Testing

/// AES-256-GCM over OpenSSL (`SealedBox`): known answers from the GCM specification's AES-256
/// test cases, and every kind of tampering refused.
@Suite struct SealedBoxTests {
    static let zeroKey = [UInt8](repeating: 0, count: 32)
    static let zeroNonce = [UInt8](repeating: 0, count: 12)

    @Test("GCM test cases 13 and 14 (AES-256, zero key and IV): tag alone, and 16 zero bytes")
    func knownAnswers() throws {
        let empty = try #require(SealedBox.seal([], key: Self.zeroKey, nonce: Self.zeroNonce))
        #expect(Array(empty[12...]) == hex("530f8afbc74536b9a963b4f1c4cb738b"))
        let sealed = try #require(SealedBox.seal([UInt8](repeating: 0, count: 16), key: Self.zeroKey, nonce: Self.zeroNonce))
        #expect(Array(sealed[0..<12]) == Self.zeroNonce)
        #expect(Array(sealed[12..<28]) == hex("cea7403d4d606b6e074ec5d3baf39d18"))
        #expect(Array(sealed[28...]) == hex("d0d1c8a799996bf0265b98b5d48ab919"))
        let opened = sealed.withUnsafeBytes { SealedBox.open($0, key: Self.zeroKey) }
        #expect(opened == [UInt8](repeating: 0, count: 16))
    }

    @Test("Round trip with associated data; any flipped byte, another key, other associated data or a cut is refused")
    func tampering() throws {
        let key = (0..<32).map { UInt8($0 * 7 & 0xFF) }
        let nonce = (0..<12).map { UInt8($0 + 1) }
        let plaintext: [UInt8] = Array("a session and a serial".utf8)
        let sealed = try #require(SealedBox.seal(plaintext, associated: [9], key: key, nonce: nonce))
        #expect(sealed.count == plaintext.count + SealedBox.overhead)
        #expect(sealed.withUnsafeBytes { SealedBox.open($0, associated: [9], key: key) } == plaintext)
        for i in sealed.indices {
            var altered = sealed
            altered[i] ^= 0x80
            #expect(altered.withUnsafeBytes { SealedBox.open($0, associated: [9], key: key) } == nil, "byte \(i)")
        }
        var other = key
        other[0] ^= 1
        #expect(sealed.withUnsafeBytes { SealedBox.open($0, associated: [9], key: other) } == nil)
        #expect(sealed.withUnsafeBytes { SealedBox.open($0, associated: [8], key: key) } == nil)
        #expect(sealed.withUnsafeBytes { SealedBox.open($0, key: key) } == nil)
        let cut = Array(sealed.dropLast())
        #expect(cut.withUnsafeBytes { SealedBox.open($0, associated: [9], key: key) } == nil)
        let short = Array(sealed.prefix(SealedBox.overhead - 1))
        #expect(short.withUnsafeBytes { SealedBox.open($0, associated: [9], key: key) } == nil)
    }
}
