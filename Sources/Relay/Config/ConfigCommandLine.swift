/// The command line read as configuration: every `turnserver.conf` key as a long option
/// (`--key=value`, `--key value` when the key needs a value, `--flag`), coturn's short options,
/// and `-c FILE` / `--config FILE` and `-n` (no configuration file).
///
/// Arguments exclude the program name.
public struct ConfigCommandLine: Hashable, Sendable {
    /// The file named by `-c` or `--config` (the last one given).
    public var configFile: String?
    /// `-n`: read no configuration file.
    public var noConfigFile = false
    /// Options other than `-c` and `-n`, keyed by long name, in order.
    public var entries: [ConfigEntry] = []

    /// coturn's short options and the long keys they stand for.
    static let shortOptions: [Character: String] = [
        "p": "listening-port", "L": "listening-ip", "E": "relay-ip", "X": "external-ip",
        "m": "relay-threads", "r": "realm", "a": "lt-cred-mech", "z": "no-auth", "u": "user",
        "q": "user-quota", "Q": "total-quota", "s": "max-bps", "B": "bps-capacity", "v": "verbose",
        "V": "Verbose", "f": "fingerprint", "S": "stun-only", "l": "log-file", "C": "rest-api-separator",
        "o": "daemon", "d": "listening-device", "i": "relay-device", "b": "userdb", "e": "psql-userdb",
        "M": "mysql-userdb", "J": "mongo-userdb", "N": "redis-userdb", "O": "redis-statsdb",
        "K": "keep-address-family", "A": "allocation-default-address-family",
    ]

    public init(configFile: String? = nil, noConfigFile: Bool = false, entries: [ConfigEntry] = []) {
        self.configFile = configFile
        self.noConfigFile = noConfigFile
        self.entries = entries
    }

    public static func parse(_ arguments: [String]) throws(ConfigError) -> ConfigCommandLine {
        var result = ConfigCommandLine()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument.hasPrefix("--"), argument.count > 2 {
                try result.readLongOption(argument.dropFirst(2), rest: &remaining)
            } else if argument.hasPrefix("-"), !argument.hasPrefix("--"), argument.count > 1 {
                try result.readShortOption(argument.dropFirst(), rest: &remaining)
            } else {
                throw .malformed("unexpected argument '\(argument)'", at: .commandLine)
            }
        }
        if result.noConfigFile, result.configFile != nil {
            throw .conflict("'-n' (no configuration file) contradicts '-c'", key: nil, at: .commandLine)
        }
        return result
    }

    private mutating func readLongOption(_ option: Substring, rest: inout ArraySlice<String>) throws(ConfigError) {
        let name: String
        var value: String?
        if let equals = option.firstIndex(of: "=") {
            name = String(option[..<equals])
            value = String(option[option.index(after: equals)...])
        } else {
            name = String(option)
        }
        if name == "config" {
            if value == nil { value = try Self.nextValue(for: name, expected: "a file path", rest: &rest) }
            configFile = value
            return
        }
        guard let key = ConfigKeyTable.key(named: name) else { throw .unknownKey(name, at: .commandLine) }
        if value == nil, key.arity == .required {
            value = try Self.nextValue(for: name, expected: key.type.expected, rest: &rest)
        }
        entries.append(ConfigEntry(key: key.name, value: value, source: .commandLine))
    }

    /// `-x`, or `-x VALUE` / `-xVALUE` for options that take a value.
    private mutating func readShortOption(_ option: Substring, rest: inout ArraySlice<String>) throws(ConfigError) {
        guard let letter = option.first else { return }
        let attached = option.dropFirst()
        switch letter {
        case "c":
            configFile =
                attached.isEmpty
                ? try Self.nextValue(for: "-c", expected: "a file path", rest: &rest) : String(attached)
        case "n" where attached.isEmpty:
            noConfigFile = true
        default:
            guard let name = Self.shortOptions[letter], let key = ConfigKeyTable.key(named: name) else {
                throw .unknownOption("-\(option)")
            }
            var value: String?
            if key.arity == .required {
                value =
                    attached.isEmpty
                    ? try Self.nextValue(for: name, expected: key.type.expected, rest: &rest) : String(attached)
            } else if !attached.isEmpty {
                throw .unknownOption("-\(option)")
            }
            entries.append(ConfigEntry(key: key.name, value: value, source: .commandLine))
        }
    }

    private static func nextValue(for name: String, expected: String, rest: inout ArraySlice<String>)
        throws(ConfigError) -> String
    {
        guard let value = rest.popFirst() else { throw .missingValue(name, at: .commandLine, expected: expected) }
        return value
    }
}
