/// An allocation's USERNAME (RFC 8656 §5), kept small. A REST username, "<expiry>:<user>"
/// (docs/credentials.md), is kept as its expiry and its user, so a user of up to 15 bytes
/// needs no heap storage of its own (Swift keeps such a string inline); any other username is
/// kept whole. Only a canonical expiry (decimal digits, no leading zero, at most 18) is split,
/// so `string` gives back exactly what was kept (docs/benchmark.md, "Node capacity").
struct StoredUsername: Sendable {
    /// The REST form's expiry; -1 when the username is kept whole in `rest`.
    private let expiry: Int64
    private let rest: String

    init(_ username: String) {
        if let (expiry, user) = Self.split(username) {
            self.expiry = expiry
            rest = String(user)
        } else {
            expiry = -1
            rest = username
        }
    }

    /// The username as the client sent it.
    var string: String { expiry < 0 ? rest : "\(expiry):\(rest)" }

    /// Whether `username` is this one, compared without building either whole.
    func matches(_ username: String) -> Bool {
        guard let (expiry, user) = Self.split(username) else {
            return self.expiry < 0 && rest.utf8.elementsEqual(username.utf8)
        }
        return self.expiry == expiry && rest.utf8.elementsEqual(user.utf8)
    }

    /// The canonical REST form's expiry and user, or nil.
    private static func split(_ username: String) -> (Int64, Substring)? {
        let utf8 = username.utf8
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let digits = utf8[..<colon]
        guard (1...18).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            digits.count == 1 || digits.first != 0x30
        else { return nil }
        let expiry = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
        return (expiry, username[username.index(after: colon)...])
    }
}
