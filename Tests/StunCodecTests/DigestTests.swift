import StunCodec
import Testing

@Suite("Digests, HMAC and CRC-32 against published vectors")
struct DigestTests {
    @Test("CRC-32 check value of \"123456789\" is 0xCBF43926")
    func crcCheckValue() {
        #expect(Array("123456789".utf8).withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
        let split = Array("123456789".utf8)
        let incremental = split[0..<4].withUnsafeBytes { a in
            split[4...].withUnsafeBytes { b in CRC32.update(CRC32.checksum(a), b) }
        }
        #expect(incremental == 0xCBF4_3926)
    }

    @Test("CRC-32 by eight-byte slices equals the bit-at-a-time definition at every length and offset")
    func crcSlicesMatchTheDefinition() {
        func bitwise(_ bytes: ArraySlice<UInt8>) -> UInt32 {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes {
                c ^= UInt32(b)
                for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            return ~c
        }
        var state: UInt32 = 0x1234_5678
        let data = (0..<300).map { _ -> UInt8 in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
        for offset in 0..<8 {
            for length in 0...(data.count - offset) where length < 40 || length % 7 == 0 {
                let part = data[offset..<(offset + length)]
                #expect(part.withUnsafeBytes { CRC32.checksum($0) } == bitwise(part), "offset \(offset), length \(length)")
            }
        }
        let whole = data.withUnsafeBytes { CRC32.checksum($0) }
        let joined = data[0..<13].withUnsafeBytes { a in data[13...].withUnsafeBytes { b in CRC32.update(CRC32.checksum(a), b) } }
        #expect(whole == joined)
    }

    @Test("Hashes of \"abc\"")
    func hashes() {
        let abc = Array("abc".utf8)
        #expect(DigestAlgorithm.md5.hash(abc) == hex("900150983cd24fb0d6963f7d28e17f72"))
        #expect(DigestAlgorithm.sha1.hash(abc) == hex("a9993e364706816aba3e25717850c26c9cd0d89d"))
        #expect(
            DigestAlgorithm.sha256.hash(abc)
                == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }

    @Test("HMAC-SHA1 (RFC 2202 cases 1 and 6) and HMAC-SHA256 (RFC 4231 cases 1 and 6)")
    func hmacVectors() {
        let hiThere = Array("Hi There".utf8)
        let longKeyText = Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)
        #expect(
            DigestAlgorithm.sha1.hmac(key: [UInt8](repeating: 0x0B, count: 20), message: hiThere)
                == hex("b617318655057264e28bc0b6fb378c8ef146be00"))
        #expect(
            DigestAlgorithm.sha1.hmac(key: [UInt8](repeating: 0xAA, count: 80), message: longKeyText)
                == hex("aa4ae5e15272d00e95705637ce8a3b55ed402112"))
        #expect(
            DigestAlgorithm.sha256.hmac(key: [UInt8](repeating: 0x0B, count: 20), message: hiThere)
                == hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        #expect(
            DigestAlgorithm.sha256.hmac(key: [UInt8](repeating: 0xAA, count: 131), message: longKeyText)
                == hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"))
    }

    @Test("Constant-time comparison")
    func constantTime() {
        #expect(constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(constantTimeEqual([], []))
    }
}
