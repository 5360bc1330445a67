import Glibc
import StunCodec

/// A benchmark client's credentials: coturn-style TURN REST credentials
/// (draft-uberti-behave-turn-rest-00 §2.2: username "<expiry>:<user>", password
/// base64(HMAC-SHA1(secret, username))), or a long-term user's name and password (a user of a
/// user database, docs/userdb.md).
struct ClientCredentials {
    let username: String
    let password: String

    init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    init(secret: String, user: String, validForSeconds: Int = 86_400) {
        var now = timespecNow()
        now += validForSeconds
        username = "\(now):\(user)"
        password = KeyDerivation.restPassword(secret: secret, username: username)
    }

    /// The long-term key for `realm`: MD5(username ":" realm ":" password) (RFC 8489 §9.2.2).
    func key(realm: String) -> [UInt8] {
        KeyDerivation.longTermKeyMD5(username: username, realm: realm, password: password)
    }
}

/// Wall-clock seconds since the epoch (REST usernames carry an absolute expiry).
private func timespecNow() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return ts.tv_sec
}
