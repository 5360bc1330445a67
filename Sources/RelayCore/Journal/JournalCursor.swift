import StunCodec

/// Why a record's payload was refused though its frame was whole (its CRC matched).
struct JournalRefusal: Error {
    var reason: JournalDropReason
    static let malformed = JournalRefusal(reason: .malformed)
}

/// A read position in one payload. Every read checks the bytes left first and throws
/// `.malformed` when they are too few, so no field, however it lies, reads past the payload;
/// nothing is allocated from a length before that length is checked against what is left.
struct JournalCursor {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func take(_ count: Int) throws(JournalRefusal) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw .malformed }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8() throws(JournalRefusal) -> UInt8 { try take(1)[0] }

    mutating func u16() throws(JournalRefusal) -> UInt16 {
        let b = try take(2)
        return UInt16(b[0]) << 8 | UInt16(b[1])
    }

    mutating func u32() throws(JournalRefusal) -> UInt32 {
        let b = try take(4)
        return b.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64() throws(JournalRefusal) -> UInt64 {
        let b = try take(8)
        return b.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A `CLOCK_BOOTTIME` second: never negative.
    mutating func time() throws(JournalRefusal) -> Int64 {
        let value = try u64()
        guard value <= UInt64(Int64.max) else { throw .malformed }
        return Int64(value)
    }

    /// A family byte (1 IPv4, 2 IPv6, RFC 8489 §14.1) and the address's 4 or 16 bytes.
    mutating func ip() throws(JournalRefusal) -> IPAddress {
        let count: Int
        switch try u8() {
        case IPAddress.Family.ipv4.rawValue: count = 4
        case IPAddress.Family.ipv6.rawValue: count = 16
        default: throw .malformed
        }
        guard let ip = IPAddress(bytes: try take(count)) else { throw .malformed }
        return ip
    }

    mutating func transportAddress() throws(JournalRefusal) -> TransportAddress {
        let ip = try ip()
        return TransportAddress(ip: ip, port: try u16())
    }

    /// Bytes after a 1- or 2-byte length, at most `max` of them.
    mutating func bytes(lengthBytes: Int, max: Int) throws(JournalRefusal) -> [UInt8] {
        let count = lengthBytes == 1 ? Int(try u8()) : Int(try u16())
        guard count <= max else { throw .malformed }
        return Array(try take(count))
    }

    /// Well-formed UTF-8 after a 1- or 2-byte length, at most `max` bytes of it.
    mutating func string(lengthBytes: Int, max: Int) throws(JournalRefusal) -> String {
        let count = lengthBytes == 1 ? Int(try u8()) : Int(try u16())
        guard count <= max, let text = String(validating: try take(count), as: UTF8.self) else { throw .malformed }
        return text
    }

    /// A count of entries each at least `minBytes` long, at most `max`: checked against the bytes
    /// left before anyone reserves room for them.
    mutating func count(max: Int, minBytes: Int) throws(JournalRefusal) -> Int {
        let count = Int(try u16())
        guard count <= max, count * minBytes <= remaining else { throw .malformed }
        return count
    }

    /// The payload is used up: no trailing bytes.
    func end() throws(JournalRefusal) {
        guard remaining == 0 else { throw .malformed }
    }
}
