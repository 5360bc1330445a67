/// The 96-bit transaction ID (RFC 8489 §5), stored inline.
public struct TransactionID: Hashable, Sendable {
    /// Bytes 0–3 of the ID (network order).
    public var high: UInt32
    /// Bytes 4–11 of the ID (network order).
    public var low: UInt64

    @inlinable
    public init(high: UInt32, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Reads 12 bytes in network order.
    @inlinable
    public init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= 12)
        high = bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self).bigEndian
        low = bytes.loadUnaligned(fromByteOffset: 4, as: UInt64.self).bigEndian
    }

    /// Writes the 12 bytes in network order.
    @inlinable
    public func write(to bytes: UnsafeMutableRawBufferPointer) {
        bytes.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt32.self)
        bytes.storeBytes(of: low.bigEndian, toByteOffset: 4, as: UInt64.self)
    }

    /// Byte `index` (0–11) in network order; used for XOR address coding (RFC 8489 §14.2).
    @inlinable
    public func byte(_ index: Int) -> UInt8 {
        if index < 4 { return UInt8(truncatingIfNeeded: high >> UInt32(8 * (3 - index))) }
        return UInt8(truncatingIfNeeded: low >> UInt64(8 * (11 - index)))
    }

    /// A random transaction ID from the system generator.
    public static func random() -> TransactionID {
        var g = SystemRandomNumberGenerator()
        return TransactionID(high: g.next(), low: g.next())
    }
}

extension TransactionID: CustomStringConvertible {
    public var description: String {
        let h = String(high, radix: 16)
        let l = String(low, radix: 16)
        return String(repeating: "0", count: 8 - h.count) + h + String(repeating: "0", count: 16 - l.count) + l
    }
}
