import StunCodec

/// The STUN Security Features a server announces in its nonce (RFC 8489 §9.2, §18.1): the
/// "nonce cookie" `obMatJos2` followed by the 4-character base64 of the 24-bit feature set, bit 0
/// the most significant bit of the first byte. A client that sees the cookie can tell when a
/// feature was stripped on the way (bid-down attack prevention, §9.2.1). Only the first byte has
/// bits defined; the other two are zero.
public struct SecurityFeatures: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// "Password algorithms" (bit 0): the server lists PASSWORD-ALGORITHMS (§9.2.4).
    public static let passwordAlgorithms = SecurityFeatures(rawValue: 0x80)
    /// "Username anonymity" (bit 1): the server takes USERHASH (§14.4).
    public static let usernameAnonymity = SecurityFeatures(rawValue: 0x40)

    /// `obMatJos2`.
    static let cookiePrefix: [UInt8] = Array("obMatJos2".utf8)
    /// The prefix and the 4 base64 characters.
    public static let cookieLength = 13

    /// The nonce cookie announcing these features.
    var cookie: String { "obMatJos2" + Base64.encode([rawValue, 0, 0]) }

    /// The features a nonce's cookie announces, nil when the nonce has no cookie (an RFC 5389
    /// style nonce) or one relayd would not write (unreadable, or bits set past the first byte).
    public static func announced(in nonce: UnsafeRawBufferPointer) -> SecurityFeatures? {
        guard nonce.count >= cookieLength, nonce.starts(with: cookiePrefix),
            let bits = Base64.decode(String(decoding: nonce[9..<13], as: UTF8.self)), bits.count == 3,
            bits[1] == 0, bits[2] == 0
        else { return nil }
        return SecurityFeatures(rawValue: bits[0])
    }
}
