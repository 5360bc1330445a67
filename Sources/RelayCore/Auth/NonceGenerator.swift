import StunCodec

/// Stateless nonces (RFC 8489 §9.2): the issue time and an HMAC over it and the client's IP.
/// Any loop thread can verify a nonce another issued; nothing is stored per client.
///
/// Layout: 8 hex digits of the issue time (unix seconds) then 16 hex digits of
/// HMAC-SHA1(key, time || client IP) truncated to 8 bytes. With security features to announce,
/// the nonce cookie comes first (`SecurityFeatures`, RFC 8489 §9.2.1) and the HMAC also covers
/// the feature bits, so a cookie changed on the way makes the nonce invalid. A nonce carries its
/// features itself: `check` reads them from the cookie.
public struct NonceGenerator: Sendable {
    let key: [UInt8]
    /// Seconds a nonce stays fresh (`stale-nonce`, default 600).
    public let lifetime: Int64

    public init(key: [UInt8], lifetime: Int64) {
        self.key = key
        self.lifetime = lifetime
    }

    /// A fresh nonce for `client` at `now`, announcing `features` (none: no cookie, the nonces of
    /// RFC 5389).
    public func make(for client: IPAddress, now: Int64, features: SecurityFeatures = []) -> String {
        let time = UInt32(truncatingIfNeeded: now)
        let body = hex32(time) + mac(time: time, client: client, features: features)
        return features.isEmpty ? body : features.cookie + body
    }

    /// Validity of a received nonce.
    public enum Verdict: Sendable, Hashable {
        case fresh
        /// Well formed and ours but older than `lifetime`: answer 438 (RFC 8489 §9.2.4).
        case stale
        /// Not a nonce this server issued for this client: also 438, with a new nonce.
        case invalid
    }

    public func check(_ nonce: UnsafeRawBufferPointer, client: IPAddress, now: Int64) -> Verdict {
        let announced = SecurityFeatures.announced(in: nonce)
        let body = UnsafeRawBufferPointer(rebasing: nonce[(announced == nil ? 0 : SecurityFeatures.cookieLength)...])
        guard body.count == 24, let time = parseHex32(UnsafeRawBufferPointer(rebasing: body[0..<8])) else {
            return .invalid
        }
        let expected = Array(mac(time: time, client: client, features: announced ?? []).utf8)
        let ok = expected.withUnsafeBytes { constantTimeEqual($0, UnsafeRawBufferPointer(rebasing: body[8..<24])) }
        guard ok else { return .invalid }
        let age = now - Int64(time)
        if age < -5 || age >= lifetime { return .stale }
        return .fresh
    }

    private func mac(time: UInt32, client: IPAddress, features: SecurityFeatures) -> String {
        var message: [UInt8] = [
            UInt8(time >> 24), UInt8(truncatingIfNeeded: time >> 16), UInt8(truncatingIfNeeded: time >> 8),
            UInt8(truncatingIfNeeded: time),
        ]
        for i in 0..<client.byteCount { message.append(client.byte(i)) }
        if !features.isEmpty { message += [0x53, features.rawValue] }  // 'S' and the feature bits
        let digest = DigestAlgorithm.sha1.hmac(key: key, message: message)
        return digest[0..<8].map { hexByte($0) }.joined()
    }

    private func hex32(_ v: UInt32) -> String {
        hexByte(UInt8(v >> 24)) + hexByte(UInt8(truncatingIfNeeded: v >> 16)) + hexByte(UInt8(truncatingIfNeeded: v >> 8))
            + hexByte(UInt8(truncatingIfNeeded: v))
    }

    private func hexByte(_ b: UInt8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [digits[Int(b >> 4)], digits[Int(b & 15)]], as: UTF8.self)
    }

    private func parseHex32(_ bytes: UnsafeRawBufferPointer) -> UInt32? {
        var v: UInt32 = 0
        for b in bytes {
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            default: return nil
            }
            v = v << 4 | d
        }
        return v
    }
}
