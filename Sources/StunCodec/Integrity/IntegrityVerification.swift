/// Verification of MESSAGE-INTEGRITY and MESSAGE-INTEGRITY-SHA256 on a received message
/// without touching the received bytes (RFC 8489 §14.5, §14.6).
///
/// The HMAC covers the header with its length field rewritten to end just after the integrity
/// attribute, then every byte up to that attribute. The rewritten header lives on the stack.
extension StunMessage {
    /// Outcome of checking the integrity attributes against a key.
    public enum IntegrityResult: Sendable, Hashable {
        /// The message carries no integrity attribute.
        case absent
        /// Every integrity attribute present matches.
        case valid
        /// An integrity attribute does not match the key.
        case invalid
    }

    /// Checks MESSAGE-INTEGRITY-SHA256 when present, and MESSAGE-INTEGRITY when present, under `key`
    /// (the long-term or short-term key of RFC 8489 §9). Comparison is constant-time.
    @inlinable
    public func verifyIntegrity(key: UnsafeRawBufferPointer) -> IntegrityResult {
        if integrityOffset == nil && integritySHA256Offset == nil { return .absent }
        if let offset = integrityOffset, !verify(at: offset, algorithm: .sha1, key: key) { return .invalid }
        if let offset = integritySHA256Offset, !verify(at: offset, algorithm: .sha256, key: key) { return .invalid }
        return .valid
    }

    /// Array-key convenience for the control path.
    public func verifyIntegrity(key: [UInt8]) -> IntegrityResult {
        key.withUnsafeBytes { verifyIntegrity(key: $0) }
    }

    @usableFromInline
    func verify(at offset: Int, algorithm: DigestAlgorithm, key: UnsafeRawBufferPointer) -> Bool {
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
        let received = UnsafeRawBufferPointer(rebasing: bytes[offset + 4..<offset + 4 + length])
        return withUnsafeTemporaryAllocation(byteCount: 20 + 32, alignment: 8) { scratch in
            let header = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<20])
            let computed = UnsafeMutableRawBufferPointer(rebasing: scratch[20..<52])
            header.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<20]))
            let adjusted = UInt16(offset + 4 + length - StunConstants.headerLength)
            header.storeBytes(of: adjusted.bigEndian, toByteOffset: 2, as: UInt16.self)
            algorithm.hmac(
                key: key, UnsafeRawBufferPointer(header), UnsafeRawBufferPointer(rebasing: bytes[20..<offset]),
                into: computed)
            return constantTimeEqual(UnsafeRawBufferPointer(rebasing: computed[0..<length]), received)
        }
    }
}
