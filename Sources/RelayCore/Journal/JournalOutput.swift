import StunCodec

/// Big-endian appends to a journal under construction: the writer's side of `JournalCursor`.
struct JournalOutput {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
        }
    }

    mutating func u64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    /// A time; a negative one cannot be written (`JournalCursor.time` would refuse it).
    mutating func time(_ value: Int64, field: String) throws(JournalEncodingError) {
        guard value >= 0 else { throw .negative(field) }
        u64(UInt64(value))
    }

    mutating func ip(_ ip: IPAddress) {
        u8(ip.family.rawValue)
        for i in 0..<ip.byteCount { u8(ip.byte(i)) }
    }

    mutating func transportAddress(_ address: TransportAddress) {
        ip(address.ip)
        u16(address.port)
    }

    /// `value` after its length in `lengthBytes` bytes, when it is at most `max` bytes long.
    mutating func bytes(_ value: some Collection<UInt8>, lengthBytes: Int, max: Int, field: String)
        throws(JournalEncodingError)
    {
        guard value.count <= max else { throw .tooLong(field) }
        if lengthBytes == 1 { u8(UInt8(value.count)) } else { u16(UInt16(value.count)) }
        bytes.append(contentsOf: value)
    }

    /// A count of entries in two bytes.
    mutating func count(_ value: Int, field: String) throws(JournalEncodingError) {
        guard value <= Int(UInt16.max) else { throw .tooLong(field) }
        u16(UInt16(value))
    }
}
