import StunCodec

/// Finds the long-term key(s) a USERNAME may be using (RFC 8489 §9.2.2): static users from
/// `user=` lines, and coturn's TURN REST credentials (`use-auth-secret`) under any of the
/// configured secrets, so secrets can be rotated without refusing clients mid-rotation.
public struct CredentialStore: Sendable {
    public let realm: String
    let restSecrets: [String]
    let separator: String
    let users: [String: [UInt8]]

    /// `users`: each static user's long-term key (RFC 8489 §9.2.2); `restSecrets`: the shared
    /// secrets REST usernames `<expiry><separator><user>` are checked under (empty: no REST).
    public init(realm: String, users: [String: [UInt8]], restSecrets: [String], separator: String) {
        self.realm = realm
        self.users = users
        self.restSecrets = restSecrets
        self.separator = separator
    }

    /// Why no key could be offered for a USERNAME.
    public enum Failure: Error, Sendable, Hashable {
        /// Neither a static user nor a well-formed REST username.
        case unknownUser
        /// A REST username whose expiry timestamp has passed.
        case expired
    }

    /// Candidate keys for `username` at unix time `now`: one for a static user, one per REST secret.
    public func candidateKeys(for username: String, now: Int64) -> Result<[[UInt8]], Failure> {
        if let key = users[username] { return .success([key]) }
        guard !restSecrets.isEmpty else { return .failure(.unknownUser) }
        guard let expiry = CredentialStore.restExpiry(of: username, separator: separator) else {
            return .failure(.unknownUser)
        }
        guard expiry > now else { return .failure(.expired) }
        return .success(
            restSecrets.map { secret in
                KeyDerivation.longTermKeyMD5(
                    username: username, realm: realm,
                    password: KeyDerivation.restPassword(secret: secret, username: username))
            })
    }

    /// The unix expiry of a REST username `<expiry>[<separator><user id>]`, nil when malformed.
    public static func restExpiry(of username: String, separator: String) -> Int64? {
        let stamp: Substring
        if let range = firstRange(of: separator, in: username) {
            stamp = username[..<range.lowerBound]
        } else {
            stamp = Substring(username)
        }
        guard !stamp.isEmpty, stamp.utf8.count <= 19, stamp.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int64(stamp)
    }

    /// The user id part of a REST username (after the separator), or the whole name; used for quotas and logs.
    public func userID(of username: String) -> Substring {
        if !restSecrets.isEmpty, let range = CredentialStore.firstRange(of: separator, in: username),
            CredentialStore.restExpiry(of: username, separator: separator) != nil
        {
            return username[range.upperBound...]
        }
        return Substring(username)
    }

    /// The first occurrence of `separator` in `text`, compared byte for byte in UTF-8 (no
    /// Foundation: this runs for every authenticated request). Nil for an empty separator.
    static func firstRange(of separator: String, in text: String) -> Range<String.Index>? {
        let needle = Array(separator.utf8)
        guard let first = needle.first else { return nil }
        let utf8 = text.utf8
        var i = utf8.startIndex
        while let start = utf8[i...].firstIndex(of: first) {
            var end = start
            var matched = true
            for byte in needle {
                guard end != utf8.endIndex, utf8[end] == byte else {
                    matched = false
                    break
                }
                end = utf8.index(after: end)
            }
            if matched { return start..<end }
            i = utf8.index(after: start)
        }
        return nil
    }
}
