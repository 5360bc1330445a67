import RelayCore

/// A block as text (docs/admin.md, "Blocks that last"): `until setAt by`, with the user in front
/// in the `state-dir` file (`until setAt user by`, and `pending` for a change the cluster has not
/// confirmed). A lift is an entry whose `until` is 0. Times are unix seconds; the user
/// and the key name are percent-encoded, so a space or a newline in a name cannot break a line.
/// Reading is bounded and total: anything malformed is refused (nil), never trusted.
enum BlockRecord {
    /// A user name: the admin API's 256 bytes, with a tenant's prefix (`tenant/`) in front.
    static let maxUserBytes = 512
    /// A key name, as kept (`clampedSetBy` cuts a longer one).
    static let maxSetByBytes = 256

    /// The file's line for `entry`, with its newline.
    static func line(_ entry: UserBlocklist.Entry, pending: Bool = false) -> String {
        "\(entry.until) \(entry.setAt) \(encoded(entry.user)) \(encoded(entry.setBy))\(pending ? " pending" : "")\n"
    }

    /// One line of the file (without its newline), and whether it is a change not yet confirmed.
    static func parseLine(_ line: Substring) -> (entry: UserBlocklist.Entry, pending: Bool)? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 4 || (fields.count == 5 && fields[4] == "pending"),
            let user = decoded(fields[2], limit: maxUserBytes), !user.isEmpty,
            let entry = entry(user: user, until: fields[0], setAt: fields[1], setBy: fields[3])
        else { return nil }
        return (entry, fields.count == 5)
    }

    /// A key name cut to what a record keeps, on a character boundary.
    static func clampedSetBy(_ name: String) -> String {
        guard name.utf8.count > maxSetByBytes else { return name }
        var out = ""
        for character in name {
            guard out.utf8.count + character.utf8.count <= maxSetByBytes else { break }
            out.append(character)
        }
        return out
    }

    /// The value stored in Redis under the user's field.
    static func value(_ entry: UserBlocklist.Entry) -> String {
        "\(entry.until) \(entry.setAt) \(encoded(entry.setBy))"
    }

    /// A Redis field and value; the field is the user's name as bytes.
    static func parse(user: [UInt8], value: Substring) -> UserBlocklist.Entry? {
        guard (1...maxUserBytes).contains(user.count), let name = String(validating: user, as: UTF8.self) else {
            return nil
        }
        let fields = value.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        return entry(user: name, until: fields[0], setAt: fields[1], setBy: fields[2])
    }

    private static func entry(user: String, until: Substring, setAt: Substring, setBy: Substring) -> UserBlocklist.Entry? {
        guard let until = Int64(until), until >= 0, let setAt = Int64(setAt), setAt >= 0,
            let by = decoded(setBy, limit: maxSetByBytes)
        else { return nil }
        return UserBlocklist.Entry(user: user, until: until, setBy: by, setAt: setAt)
    }

    /// Every byte but letters, digits and `-._~:@` as `%XX`.
    static func encoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    private static func decoded(_ text: Substring, limit: Int) -> String? {
        guard text.utf8.count <= limit * 3, let plain = QueryString.decode(text, plusIsSpace: false),
            plain.utf8.count <= limit
        else { return nil }
        return plain
    }
}
