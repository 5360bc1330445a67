/// Keys for MESSAGE-INTEGRITY (RFC 8489 §9.1.1, §9.2.2) and coturn's TURN REST passwords.
///
/// Passwords are taken as already prepared bytes: the OpaqueString preparation (RFC 8265 §4.2)
/// needs Unicode normalization, which lives beside the server's auth code, outside this
/// Foundation-free codec.
public enum KeyDerivation {
    /// Short-term key: the password itself (RFC 8489 §9.1.1).
    public static func shortTermKey(password: [UInt8]) -> [UInt8] { password }

    /// Long-term key with MD5: MD5(username ":" realm ":" password) (RFC 8489 §9.2.2).
    public static func longTermKeyMD5(username: [UInt8], realm: [UInt8], password: [UInt8]) -> [UInt8] {
        DigestAlgorithm.md5.hash(username + [0x3A] + realm + [0x3A] + password)
    }

    /// Long-term key with SHA-256: SHA-256(username ":" realm ":" password) (RFC 8489 §9.2.2).
    public static func longTermKeySHA256(username: [UInt8], realm: [UInt8], password: [UInt8]) -> [UInt8] {
        DigestAlgorithm.sha256.hash(username + [0x3A] + realm + [0x3A] + password)
    }

    /// String convenience for the MD5 long-term key; strings are used as UTF-8.
    public static func longTermKeyMD5(username: String, realm: String, password: String) -> [UInt8] {
        longTermKeyMD5(username: Array(username.utf8), realm: Array(realm.utf8), password: Array(password.utf8))
    }

    /// coturn `use-auth-secret` password: base64(HMAC-SHA1(secret, username))
    /// (draft-uberti-behave-turn-rest-00 §2.2).
    public static func restPassword(secret: String, username: String) -> String {
        Base64.encode(DigestAlgorithm.sha1.hmac(key: Array(secret.utf8), message: Array(username.utf8)))
    }
}
