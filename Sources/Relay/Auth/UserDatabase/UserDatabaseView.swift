import RelayCore

/// What relayd serves from coturn's user database (docs/userdb.md): everything it reads, held in
/// memory, so that no packet and no loop ever waits for the database. Built off the loops by
/// `UserDatabaseWatcher` and swapped in whole.
public struct UserDatabaseView: Sendable, Equatable {
    /// One realm's rows.
    public struct Realm: Sendable, Equatable {
        /// Long-term keys from `turnusers_lt.hmackey` (RFC 8489 §9.2.2): MD5 keys (16 bytes,
        /// what coturn's `turnadmin` writes) and SHA-256 keys (32 bytes), by user name.
        public var md5Keys: [String: [UInt8]] = [:]
        public var sha256Keys: [String: [UInt8]] = [:]
        /// `turn_secret`: REST secrets, several at once while one is rotated out.
        public var secrets: [String] = []
        /// `allowed_peer_ip`, `denied_peer_ip`: peer address ranges as coturn writes them.
        public var allowedPeers: [String] = []
        public var deniedPeers: [String] = []
        /// `turn_realm_option`: `max-bps`, `total-quota`, `user-quota`.
        public var options: [String: String] = [:]

        public init() {}

        public var userCount: Int { md5Keys.count + sha256Keys.keys.filter { md5Keys[$0] == nil }.count }
    }

    public var realms: [String: Realm] = [:]
    /// `turn_origin_to_realm`.
    public var originToRealm: [String: String] = [:]
    /// Rows skipped because a value was too long or a key was not hex of a known length.
    public var refusedRows = 0

    public init() {}

    public var userCount: Int { realms.values.reduce(0) { $0 + $1.userCount } }
}
