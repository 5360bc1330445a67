/// Base64 with padding (RFC 4648 §4), for REST passwords; the codec has no Foundation.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int((v >> UInt32(shift)) & 63)]) }
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            var v = UInt32(bytes[i]) << 16
            if rest == 2 { v |= UInt32(bytes[i + 1]) << 8 }
            out.append(alphabet[Int((v >> 18) & 63)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(rest == 2 ? alphabet[Int((v >> 6) & 63)] : 0x3D)
            out.append(0x3D)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64; nil on any character outside the alphabet or bad padding.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            var v: UInt32 = 0
            var pad = 0
            for j in 0..<4 {
                let c = chars[i + j]
                let d: UInt32
                switch c {
                case 0x41...0x5A: d = UInt32(c - 0x41)
                case 0x61...0x7A: d = UInt32(c - 0x61 + 26)
                case 0x30...0x39: d = UInt32(c - 0x30 + 52)
                case 0x2B: d = 62
                case 0x2F: d = 63
                case 0x3D where i + 4 == chars.count && j >= 2: pad += 1; d = 0
                default: return nil
                }
                if pad > 0 && c != 0x3D { return nil }
                v = v << 6 | d
            }
            out.append(UInt8(v >> 16))
            if pad < 2 { out.append(UInt8((v >> 8) & 0xFF)) }
            if pad < 1 { out.append(UInt8(v & 0xFF)) }
            i += 4
        }
        return out
    }
}
