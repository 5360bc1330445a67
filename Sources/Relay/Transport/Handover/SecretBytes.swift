import CStreamIO

/// Bytes that carry key material: a TLS session's traffic secrets on their way through a live
/// upgrade (docs/live-upgrade.md, "TLS clients"). One buffer of its own, which a copy of the
/// value shares instead of duplicating (a Swift array would leave copies behind as it grows or
/// is written to), zeroed with `OPENSSL_cleanse` when the last holder lets go.
final class SecretBytes: @unchecked Sendable, Equatable {
    // Filled in `init`, read-only afterwards: threads may share it.
    private let buffer: UnsafeMutableRawBufferPointer
    let count: Int

    /// `count` bytes, written by `fill` once.
    private init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        buffer = .allocate(byteCount: max(count, 1), alignment: 16)
        self.count = count
        fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
    }

    /// A copy of `bytes`.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { if bytes.count > 0 { $0.copyMemory(from: bytes) } }
    }

    /// A copy of `bytes` (wiping the array itself is the caller's concern).
    convenience init(_ bytes: [UInt8]) {
        self.init(count: bytes.count) { target in bytes.withUnsafeBytes { if $0.count > 0 { target.copyMemory(from: $0) } } }
    }

    var isEmpty: Bool { count == 0 }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    deinit {
        Self.wipe(buffer)
        buffer.deallocate()
    }

    /// Zeroes `bytes` in a way the compiler cannot drop (`OPENSSL_cleanse`).
    static func wipe(_ bytes: UnsafeMutableRawBufferPointer) {
        relayd_tls_records_wipe(bytes.baseAddress, bytes.count)
    }

    static func == (a: SecretBytes, b: SecretBytes) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
    }
}
