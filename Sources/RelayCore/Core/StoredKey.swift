/// An allocation's long-term key (RFC 8489 §9.2.2: MD5, 16 bytes, or SHA-256, 32; none under
/// `no-auth`), kept inside the allocation rather than in an array of its own: an array would
/// cost every allocation another 64 B of heap (docs/benchmark.md, "Node capacity").
struct StoredKey: Sendable {
    /// The most a key holds: a SHA-256 digest.
    static let capacity = 32
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private let count: UInt8

    /// `bytes`, of at most `capacity` bytes (the journal reader and the key derivation give no
    /// more; anything past it is not kept).
    init(_ bytes: [UInt8]) {
        count = UInt8(min(bytes.count, Self.capacity))
        withUnsafeMutableBytes(of: &words) { raw in
            raw.copyBytes(from: bytes.prefix(Self.capacity))
        }
    }

    /// The key's bytes.
    var bytes: [UInt8] {
        withUnsafeBytes(of: words) { raw in Array(raw.prefix(Int(count))) }
    }
}
