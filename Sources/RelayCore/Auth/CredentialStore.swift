import StunCodec

/// Finds the long-term key(s) a USERNAME may be using (RFC 8489 §9.2.2): static users from
/// `user=` lines, and coturn's TURN REST credentials (`use-auth-secret`) under any of the
/// configured secrets, so secrets can be rotated without refusing clients mid-rotation.
public struct CredentialStore: Sendable {
    public let realm: String
    public let restSecrets: [String]
    let separator: String
    public let users: [String: [UInt8]]
    public let sha256Users: [String: [UInt8]]
    /// Each static user by the first 8 bytes of SHA-256(username ":" realm), its USERHASH (RFC
    /// 8489 §14.4): a word a user instead of 32 bytes, which matters with a million users from a
    /// user database (docs/userdb.md). A lookup checks the whole hash of the name it finds.
    let userhashes: [UInt64: String]

    /// `users`: each static user's MD5 long-term key (RFC 8489 §9.2.2); `sha256Users`: the
    /// SHA-256 keys of those whose password is known (a user given by its MD5 key has none);
    /// `restSecrets`: the shared secrets REST usernames `<expiry><separator><user>` are checked
    /// under (empty: no REST).
    public init(
        realm: String, users: [String: [UInt8]], sha256Users: [String: [UInt8]] = [:], restSecrets: [String],
        separator: String
    ) {
        self.realm = realm
        self.users = users
        self.sha256Users = sha256Users
        self.restSecrets = restSecrets
        self.separator = separator
        var hashes: [UInt64: String] = [:]
        hashes.reserveCapacity(users.count)
        for name in users.keys { hashes[Self.prefix(Self.userhash(name, realm: realm))] = name }
        userhashes = hashes
    }

    /// The static user whose USERHASH is `userhash` (RFC 8489 §14.4). A REST username cannot be
    /// found this way: its password derives from the name, which the hash hides (docs/auth.md).
    public func username(forUserhash userhash: [UInt8]) -> String? {
        guard userhash.count == 32, let name = userhashes[Self.prefix(userhash)],
            Self.userhash(name, realm: realm) == userhash
        else { return nil }
        return name
    }

    private static func userhash(_ name: String, realm: String) -> [UInt8] {
        DigestAlgorithm.sha256.hash(Array(name.utf8) + [0x3A] + Array(realm.utf8))
    }

    private static func prefix(_ hash: [UInt8]) -> UInt64 { hash.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }

    /// Why no key could be offered for a USERNAME.
    public enum Failure: Error, Sendable, Hashable {
        /// Neither a static user nor a well-formed REST username.
        case unknownUser
        /// A REST username whose expiry timestamp has passed.
        case expired
    }

    /// Candidate MD5 keys for `username` at unix time `now`: one for a static user, one per REST secret.
    public func candidateKeys(for username: String, now: Int64) -> Result<[[UInt8]], Failure> {
        candidateKeys(for: username, algorithm: .md5, now: now)
    }

    /// Candidate keys for `username` under a password algorithm (RFC 8489 §9.2.2, §18.5.1): MD5
    /// or SHA-256 of username ":" realm ":" password; unknown algorithms know no user.
    public func candidateKeys(for username: String, algorithm: PasswordAlgorithm, now: Int64) -> Result<
        [[UInt8]], Failure
    > {
        let sha256 = algorithm == .sha256
        guard sha256 || algorithm == .md5 else { return .failure(.unknownUser) }
        if users[username] != nil {
            guard let key = sha256 ? sha256Users[username] : users[username], !key.isEmpty else {
                return .failure(.unknownUser)
            }
            return .success([key])
        }
        guard !restSecrets.isEmpty else { return .failure(.unknownUser) }
        guard let expiry = CredentialStore.restExpiry(of: username, separator: separator) else {
            return .failure(.unknownUser)
        }
        guard expiry > now else { return .failure(.expired) }
        return .success(
            restSecrets.map { secret in
                let password = Array(KeyDerivation.restPassword(secret: secret, username: username).utf8)
                let name = Array(username.utf8)
                return sha256
                    ? KeyDerivation.longTermKeySHA256(username: name, realm: Array(realm.utf8), password: password)
                    : KeyDerivation.longTermKeyMD5(username: name, realm: Array(realm.utf8), password: password)
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
