internal import CCrypto

/// The hash functions STUN needs, over OpenSSL's low-level digests with contexts on the stack,
/// so that no digest touches the heap. This folder is the codec's only door to libcrypto.
public enum DigestAlgorithm: Sendable {
    case sha1
    case sha256
    case md5

    /// Digest size in bytes.
    @inlinable
    public var outputLength: Int {
        switch self {
        case .sha1: return 20
        case .sha256: return 32
        case .md5: return 16
        }
    }

    /// HMAC block size in bytes (RFC 2104).
    @inlinable
    public var blockLength: Int { 64 }
}

/// An incremental hash over several byte ranges; the context lives inline in the value.
struct Hasher {
    private var sha1 = SHA_CTX()
    private var sha256 = SHA256_CTX()
    private var md5 = MD5_CTX()
    let algorithm: DigestAlgorithm

    init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        switch algorithm {
        case .sha1: SHA1_Init(&sha1)
        case .sha256: SHA256_Init(&sha256)
        case .md5: MD5_Init(&md5)
        }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        switch algorithm {
        case .sha1: SHA1_Update(&sha1, base, bytes.count)
        case .sha256: SHA256_Update(&sha256, base, bytes.count)
        case .md5: MD5_Update(&md5, base, bytes.count)
        }
    }

    /// Writes `algorithm.outputLength` bytes to `output`.
    mutating func finish(into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= algorithm.outputLength)
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        switch algorithm {
        case .sha1: SHA1_Final(out, &sha1)
        case .sha256: SHA256_Final(out, &sha256)
        case .md5: MD5_Final(out, &md5)
        }
    }
}

extension DigestAlgorithm {
    /// Hash of the concatenation of `parts`, written to `output`.
    public func hash(_ parts: UnsafeRawBufferPointer..., into output: UnsafeMutableRawBufferPointer) {
        var h = Hasher(self)
        for p in parts { h.update(p) }
        h.finish(into: output)
    }

    /// HMAC (RFC 2104) of `message1 || message2` under `key`, written to `output`.
    ///
    /// Two message parts let STUN integrity cover a patched header plus the received body
    /// without copying or mutating the received bytes (RFC 8489 §14.5).
    public func hmac(
        key: UnsafeRawBufferPointer, _ message1: UnsafeRawBufferPointer,
        _ message2: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        into output: UnsafeMutableRawBufferPointer
    ) {
        withUnsafeTemporaryAllocation(byteCount: 64 + 32, alignment: 8) { scratch in
            let block = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
            let inner = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<96])
            block.initializeMemory(as: UInt8.self, repeating: 0)
            if key.count > blockLength {
                var h = Hasher(self)
                h.update(key)
                h.finish(into: block)
            } else if key.count > 0 {
                block.copyMemory(from: key)
            }
            for i in 0..<64 { block[i] ^= 0x36 }
            var h = Hasher(self)
            h.update(UnsafeRawBufferPointer(block))
            h.update(message1)
            h.update(message2)
            h.finish(into: inner)
            for i in 0..<64 { block[i] ^= 0x36 ^ 0x5C }
            var o = Hasher(self)
            o.update(UnsafeRawBufferPointer(block))
            o.update(UnsafeRawBufferPointer(rebasing: inner[0..<outputLength]))
            o.finish(into: inner)
            UnsafeMutableRawBufferPointer(rebasing: output[0..<min(output.count, outputLength)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: inner[0..<min(output.count, outputLength)]))
        }
    }

    /// Convenience for the control path and tests: HMAC of `message` under `key` as bytes.
    public func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBytes { o in hmac(key: k, m, into: o) }
            }
        }
        return out
    }

    /// Convenience for the control path and tests: hash of `message` as bytes.
    public func hash(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        message.withUnsafeBytes { m in out.withUnsafeMutableBytes { o in hash(m, into: o) } }
        return out
    }
}

/// Compares two byte ranges in time that depends only on their lengths.
@inlinable
public func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}

/// Constant-time equality for byte arrays (control path).
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.withUnsafeBytes { x in b.withUnsafeBytes { y in constantTimeEqual(x, y) } }
}
