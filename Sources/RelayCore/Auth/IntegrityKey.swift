import StunCodec

/// The long-term key a request authenticated with, and how the answers to it are signed (RFC 8489
/// §9.2.4): with MESSAGE-INTEGRITY-SHA256 when the request chose a password algorithm or carried
/// MESSAGE-INTEGRITY-SHA256 itself; with MESSAGE-INTEGRITY when it was processed as MD5 without
/// either, as every RFC 5389 client (browsers among them) expects.
public struct IntegrityKey: Sendable, Hashable {
    /// The key: MD5 (16 bytes) or SHA-256 (32 bytes) of username ":" realm ":" password (§9.2.2).
    public var bytes: [UInt8]
    /// MESSAGE-INTEGRITY-SHA256 on the answers, else MESSAGE-INTEGRITY.
    public var sha256: Bool

    public init(bytes: [UInt8], sha256: Bool) {
        self.bytes = bytes
        self.sha256 = sha256
    }
}
