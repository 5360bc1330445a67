/// The shape of a key's value, used to parse it and to say what was expected.
enum ConfigValueType: Hashable, Sendable {
    /// On/off; alone it means on, coturn's `yes/no`, `true/false`, `on/off`, `1/0` are accepted too.
    case flag
    /// A decimal integer within the range.
    case integer(ClosedRange<Int>)
    /// A TCP/UDP port 1-65535.
    case port
    /// A port, or 0 meaning "not set" (coturn's default for the alternate ports).
    case portOrZero
    /// Non-empty text of at most the given number of characters.
    case string(maxLength: Int)
    /// Exactly one character.
    case character
    /// An IPv4 or IPv6 address.
    case ipAddress
    /// An address, an `a-b` range or a CIDR prefix.
    case ipRange
    /// `name:password` or `name:0x` followed by a 32-digit hex MD5 key.
    case user
    /// `public` or `public/private`.
    case externalIP
    /// `ip`, `ip:port` or `[ipv6]:port`.
    case transportAddress
    /// `name:token`.
    case apiKey
    /// `text` or `json`.
    case logFormat
    /// `off`, `auto` or `on`; alone it means `on`.
    case offloadMode
    /// RFC 8489 password algorithm names, comma-separated, in order of preference.
    case passwordAlgorithms
    /// A swift-log level name.
    case logLevel
    /// A `stun:`, `stuns:`, `turn:` or `turns:` URI.
    case uri
    /// Optional text; alone (or a boolean word) it switches a default on or off.
    case optionalText(maxLength: Int)
    /// `redis://[user:password@]host[:port][/db]`.
    case redisURL
    /// The path of a file a secret is read from (`SecretFile`).
    case secretFile
    /// coturn's `ip=… port=… dbname=… password=…`.
    case redisStatsDB
    /// `key=value` pairs, comma-separated.
    case labels
    /// Not interpreted: the value of a coturn key relayd does not implement.
    case ignored

    /// What the message says was expected.
    var expected: String {
        switch self {
        case .flag: return "a boolean (yes/no, true/false, on/off, 1/0)"
        case .integer(let range):
            if range.upperBound == .max {
                return range.lowerBound == 0 ? "a non-negative integer" : "an integer of at least \(range.lowerBound)"
            }
            return "an integer \(range.lowerBound)-\(range.upperBound)"
        case .port: return "a port number 1-65535"
        case .portOrZero: return "a port number 0-65535"
        case .string(let maxLength): return "a non-empty value of at most \(maxLength) characters"
        case .character: return "a single character"
        case .ipAddress: return "an IP address"
        case .ipRange: return "an IP address, a range 'first-last' or a CIDR prefix 'address/length'"
        case .user: return "'name:password' or 'name:0x' followed by a 32-digit hex key"
        case .externalIP: return "'public-ip' or 'public-ip/private-ip' of one address family"
        case .transportAddress: return "'ip', 'ip:port' or '[ipv6]:port'"
        case .apiKey: return "'name:token' or 'name:token:admin'"
        case .logFormat: return "'text' or 'json'"
        case .offloadMode: return "'off', 'auto' or 'on'"
        case .passwordAlgorithms: return "'sha256' and/or 'md5' ('sha1' is md5), comma-separated, each once"
        case .logLevel: return "'trace', 'debug', 'info', 'notice', 'warning', 'error' or 'critical'"
        case .uri: return "a stun:, stuns:, turn: or turns: URI"
        case .optionalText(let maxLength): return "text of at most \(maxLength) characters"
        case .redisURL: return RedisEndpoint.expectedURL
        case .secretFile: return "the path of a readable file holding the secret"
        case .redisStatsDB: return RedisEndpoint.expectedStatsDB
        case .labels: return "'key=value' pairs, comma-separated (letters, digits, '-', '_', '.', '/')"
        case .ignored: return "any value"
        }
    }
}
