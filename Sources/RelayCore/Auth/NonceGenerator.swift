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
        let body = String(unsafeUninitializedCapacity: 24) { out in
            let b = UnsafeMutableRawBufferPointer(out)
            for i in 0..<4 {
                let byte = UInt8(truncatingIfNeeded: time >> UInt32(24 - 8 * i))
                Self.writeHex(byte, into: UnsafeMutableRawBufferPointer(rebasing: b[(2 * i)...]))
            }
            withMAC(time: time, client: client, features: features) { mac in
                for i in 0..<8 { Self.writeHex(mac[i], into: UnsafeMutableRawBufferPointer(rebasing: b[(8 + 2 * i)...])) }
            }
            return 24
        }
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
        // Compares the received hex digits with the expected ones, every digit, whatever differs.
        let ok = withMAC(time: time, client: client, features: announced ?? []) { mac -> Bool in
            var diff: UInt8 = 0
            for i in 0..<8 {
                diff |= body[8 + 2 * i] ^ Self.hexDigit(mac[i] >> 4)
                diff |= body[9 + 2 * i] ^ Self.hexDigit(mac[i] & 15)
            }
            return diff == 0
        }
        guard ok else { return .invalid }
        let age = now - Int64(time)
        if age < -5 || age >= lifetime { return .stale }
        return .fresh
    }

    /// Calls `body` with the first 8 bytes of HMAC-SHA1(key, time || client IP [|| 'S' features]),
    /// computed on the stack: a nonce is made for every 401 and checked for every signed request.
    private func withMAC<R>(
        time: UInt32, client: IPAddress, features: SecurityFeatures, _ body: (UnsafeRawBufferPointer) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(byteCount: 4 + 16 + 2 + 20, alignment: 8) { scratch in
            var n = 0
            for shift in stride(from: 24, through: 0, by: -8) {
                scratch[n] = UInt8(truncatingIfNeeded: time >> UInt32(shift))
                n += 1
            }
            for i in 0..<client.byteCount {
                scratch[n] = client.byte(i)
                n += 1
            }
            if !features.isEmpty {
                scratch[n] = 0x53  // 'S', then the feature bits
                scratch[n + 1] = features.rawValue
                n += 2
            }
            let digest = UnsafeMutableRawBufferPointer(rebasing: scratch[22..<42])
            key.withUnsafeBytes { k in
                DigestAlgorithm.sha1.hmac(key: k, UnsafeRawBufferPointer(rebasing: scratch[0..<n]), into: digest)
            }
            return body(UnsafeRawBufferPointer(rebasing: digest[0..<8]))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10
    }

    /// Two lowercase hex digits of `byte` at the start of `out`.
    private static func writeHex(_ byte: UInt8, into out: UnsafeMutableRawBufferPointer) {
        out[0] = hexDigit(byte >> 4)
        out[1] = hexDigit(byte & 15)
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
