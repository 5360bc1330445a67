import Glibc

/// The bench's application payload, carried as ChannelData data (or a Send indication's DATA):
///
/// ```
///  0       4        8            16           24      28 .. size
/// | magic | flow id | sequence   | send time  | check | pattern bytes |
/// ```
///
/// `flow id` is the sending client's index, `send time` the sender's monotonic clock in ns,
/// `check` a mix of the three header words, and the tail a fixed byte pattern. The receiver
/// checks all of them, so truncation, bit flips and misdelivery count as corruption.
enum PayloadFormat {
    static let magic: UInt32 = 0x5242_4E31  // "RBN1"
    static let headerBytes = 28
    /// Smallest payload the format fits in.
    static let minimumSize = 32

    /// The pattern byte at payload offset `i`.
    @inline(__always)
    static func patternByte(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i &* 7 &+ 13) }

    /// The check word over flow, sequence and time.
    @inline(__always)
    static func check(flow: UInt32, sequence: UInt64, time: UInt64) -> UInt32 {
        var x = UInt64(flow) &* 0x9E37_79B9_7F4A_7C15 ^ sequence &* 0xC2B2_AE3D_27D4_EB4F ^ time
        x ^= x >> 29
        x = x &* 0xBF58_476D_1CE4_E5B9
        return UInt32(truncatingIfNeeded: x ^ (x >> 32))
    }

    /// Fills the pattern tail of a payload buffer once; the header is stamped per packet.
    static func fillPattern(_ payload: UnsafeMutableRawBufferPointer) {
        for i in headerBytes..<payload.count { payload[i] = patternByte(i) }
    }

    /// Writes the per-packet header at `payload`.
    @inline(__always)
    static func stamp(_ payload: UnsafeMutableRawPointer, flow: UInt32, sequence: UInt64, time: UInt64) {
        payload.storeBytes(of: magic, toByteOffset: 0, as: UInt32.self)
        payload.storeBytes(of: flow, toByteOffset: 4, as: UInt32.self)
        payload.storeBytes(of: sequence, toByteOffset: 8, as: UInt64.self)
        payload.storeBytes(of: time, toByteOffset: 16, as: UInt64.self)
        payload.storeBytes(of: check(flow: flow, sequence: sequence, time: time), toByteOffset: 24, as: UInt32.self)
    }
}

/// A received payload's header fields, once validated.
struct PayloadHeader {
    var flow: UInt32
    var sequence: UInt64
    var time: UInt64

    /// Validates `payload` (length `expectedSize`, header check, pattern against `reference`);
    /// nil when anything differs.
    @inline(__always)
    init?(validating payload: UnsafeRawBufferPointer, expectedSize: Int, reference: UnsafeRawBufferPointer) {
        guard payload.count == expectedSize else { return nil }
        let base = payload.baseAddress!
        guard base.loadUnaligned(as: UInt32.self) == PayloadFormat.magic else { return nil }
        flow = base.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        sequence = base.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        time = base.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
        guard
            base.loadUnaligned(fromByteOffset: 24, as: UInt32.self)
                == PayloadFormat.check(flow: flow, sequence: sequence, time: time)
        else { return nil }
        let tail = expectedSize - PayloadFormat.headerBytes
        guard memcmp(base + PayloadFormat.headerBytes, reference.baseAddress! + PayloadFormat.headerBytes, tail) == 0
        else { return nil }
    }
}
