import RelayCore
import Logging
import StunCodec

/// Turns value text into typed values; each function throws the type's "expected" text on failure.
enum ConfigValueParser {
    /// coturn's boolean spellings; no value means on.
    static func bool(_ text: String?) throws(ConfigValueError) -> Bool {
        guard let text, !text.isEmpty else { return true }
        if let value = booleanWord(text) { return value }
        throw ConfigValueError(expected: ConfigValueType.flag.expected)
    }

    /// `true` for yes/true/on/1, `false` for no/false/off/0 (any case), nil for other text.
    static func booleanWord(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "1", "y", "yes", "true", "on": return true
        case "0", "n", "no", "false", "off": return false
        default: return nil
        }
    }

    static func integer(_ text: String?, in range: ClosedRange<Int>) throws(ConfigValueError) -> Int {
        let type = ConfigValueType.integer(range)
        let text = try required(text, type)
        guard text.utf8.count <= 19, text.utf8.allSatisfy(isDigit), let value = Int(text), range.contains(value)
        else { throw ConfigValueError(expected: type.expected) }
        return value
    }

    static func port(_ text: String?) throws(ConfigValueError) -> UInt16 {
        let text = try required(text, .port)
        guard text.utf8.count <= 5, text.utf8.allSatisfy(isDigit), let value = UInt16(text), value != 0 else {
            throw ConfigValueError(expected: ConfigValueType.port.expected)
        }
        return value
    }

    /// A port, with 0 meaning none.
    static func portOrZero(_ text: String?) throws(ConfigValueError) -> UInt16? {
        let text = try required(text, .portOrZero)
        guard text.utf8.count <= 5, text.utf8.allSatisfy(isDigit), let value = UInt16(text) else {
            throw ConfigValueError(expected: ConfigValueType.portOrZero.expected)
        }
        return value == 0 ? nil : value
    }

    static func string(_ text: String?, maxLength: Int = 4096) throws(ConfigValueError) -> String {
        let type = ConfigValueType.string(maxLength: maxLength)
        let text = try required(text, type)
        guard !text.isEmpty, text.count <= maxLength else { throw ConfigValueError(expected: type.expected) }
        return text
    }

    static func character(_ text: String?) throws(ConfigValueError) -> String {
        let text = try required(text, .character)
        guard text.count == 1 else { throw ConfigValueError(expected: ConfigValueType.character.expected) }
        return text
    }

    static func ipAddress(_ text: String?) throws(ConfigValueError) -> IPAddress {
        guard let address = IPAddress(try required(text, .ipAddress)) else {
            throw ConfigValueError(expected: ConfigValueType.ipAddress.expected)
        }
        return address
    }

    static func ipRange(_ text: String?) throws(ConfigValueError) -> IPRange {
        guard let range = IPRange(try required(text, .ipRange)) else {
            throw ConfigValueError(expected: ConfigValueType.ipRange.expected)
        }
        return range
    }

    /// `name:password`, or `name:0x` + 32 hex digits for a precomputed MD5 key (as coturn's `user`).
    static func user(_ text: String?) throws(ConfigValueError) -> RelayConfiguration.StaticUser {
        let failure = ConfigValueError(expected: ConfigValueType.user.expected)
        guard let (name, secret) = split(try required(text, .user), at: ":") else { throw failure }
        // The name is a STUN USERNAME (RFC 8489 §14.3): OpaqueString UTF-8 under 509 bytes.
        if let problem = UsernameCheck.validate(name) {
            throw ConfigValueError(expected: "a user name that is a valid STUN USERNAME (this one is \(problem))")
        }
        guard secret.hasPrefix("0x") else { return .init(name: name, credential: .password(secret)) }
        guard let key = hexBytes(secret.dropFirst(2)), key.count == 16 else { throw failure }
        return .init(name: name, credential: .key(key))
    }

    static func externalIP(_ text: String?) throws(ConfigValueError) -> RelayConfiguration.ExternalIP {
        let failure = ConfigValueError(expected: ConfigValueType.externalIP.expected)
        let text = try required(text, .externalIP)
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let publicIP = IPAddress(parts[0]) else { throw failure }
        guard parts.count == 2 else { return .init(publicIP: publicIP) }
        guard let privateIP = IPAddress(parts[1]), privateIP.family == publicIP.family else { throw failure }
        return .init(publicIP: publicIP, privateIP: privateIP)
    }

    /// `ip:port`, `[ipv6]:port`, or a bare address on the default STUN port 3478 (as coturn).
    static func transportAddress(_ text: String?) throws(ConfigValueError) -> TransportAddress {
        let text = try required(text, .transportAddress)
        if let address = IPAddress(text) { return TransportAddress(ip: address, port: 3478) }
        guard let address = TransportAddress(text), address.port != 0 else {
            throw ConfigValueError(expected: ConfigValueType.transportAddress.expected)
        }
        return address
    }

    static func apiKey(_ text: String?) throws(ConfigValueError) -> RelayConfiguration.APIKey {
        guard let (name, whole) = split(try required(text, .apiKey), at: ":") else {
            throw ConfigValueError(expected: ConfigValueType.apiKey.expected)
        }
        var token = whole
        // `name:token:admin` (or `:credentials`): the scope is the last field when it names one.
        var scope = RelayConfiguration.APIKey.Scope.credentials
        if let colon = token.lastIndex(of: ":"),
            let named = RelayConfiguration.APIKey.Scope(rawValue: String(token[token.index(after: colon)...]))
        {
            scope = named
            token = String(token[..<colon])
            guard !token.isEmpty else { throw ConfigValueError(expected: ConfigValueType.apiKey.expected) }
        }
        return .init(name: name, token: token, scope: scope)
    }

    static func kernelOffload(_ text: String?) throws(ConfigValueError) -> RelayConfiguration.KernelOffload {
        guard let text else { return .on }
        guard let mode = RelayConfiguration.KernelOffload(rawValue: text.lowercased()) else {
            throw ConfigValueError(expected: ConfigValueType.offloadMode.expected)
        }
        return mode
    }

    /// `sha256,md5`: RFC 8489 §18.5 algorithms in order of preference. `sha1` names MD5 too: the
    /// long-term mechanism of RFC 5389 (MD5 key, HMAC-SHA1 MESSAGE-INTEGRITY), which coturn's
    /// users know by that name.
    static func passwordAlgorithms(_ text: String?) throws(ConfigValueError) -> [PasswordAlgorithm] {
        var algorithms: [PasswordAlgorithm] = []
        for name in try required(text, .passwordAlgorithms).lowercased().split(separator: ",", omittingEmptySubsequences: false) {
            let algorithm: PasswordAlgorithm
            switch name.trimmingSpaces {
            case "sha256", "sha-256": algorithm = .sha256
            case "md5", "sha1", "sha-1": algorithm = .md5
            default: throw ConfigValueError(expected: ConfigValueType.passwordAlgorithms.expected)
            }
            guard !algorithms.contains(algorithm) else {
                throw ConfigValueError(expected: ConfigValueType.passwordAlgorithms.expected)
            }
            algorithms.append(algorithm)
        }
        return algorithms
    }

    static func logFormat(_ text: String?) throws(ConfigValueError) -> RelayConfiguration.LogFormat {
        guard let format = RelayConfiguration.LogFormat(rawValue: try required(text, .logFormat).lowercased()) else {
            throw ConfigValueError(expected: ConfigValueType.logFormat.expected)
        }
        return format
    }

    static func logLevel(_ text: String?) throws(ConfigValueError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: try required(text, .logLevel).lowercased()) else {
            throw ConfigValueError(expected: ConfigValueType.logLevel.expected)
        }
        return level
    }

    static func uri(_ text: String?) throws(ConfigValueError) -> String {
        let text = try required(text, .uri)
        let schemes = ["stun:", "stuns:", "turn:", "turns:"]
        guard let scheme = schemes.first(where: { text.lowercased().hasPrefix($0) }), text.count > scheme.count,
            !text.contains(where: \.isWhitespace)
        else { throw ConfigValueError(expected: ConfigValueType.uri.expected) }
        return text
    }

    /// Text, a boolean word, or nothing: nothing and "on" words give `fallback`, "off" words give nil.
    static func optionalText(_ text: String?, fallback: String, maxLength: Int) throws(ConfigValueError) -> String? {
        guard let text, !text.isEmpty else { return fallback }
        if let on = booleanWord(text) { return on ? fallback : nil }
        guard text.count <= maxLength else {
            throw ConfigValueError(expected: ConfigValueType.optionalText(maxLength: maxLength).expected)
        }
        return text
    }

    private static func required(_ text: String?, _ type: ConfigValueType) throws(ConfigValueError) -> String {
        guard let text else { throw ConfigValueError(expected: type.expected, missing: true) }
        return text
    }

    /// Splits at the first separator; nil unless both sides are non-empty.
    private static func split(_ text: String, at separator: Character) -> (String, String)? {
        guard let index = text.firstIndex(of: separator) else { return nil }
        let head = text[..<index]
        let tail = text[text.index(after: index)...]
        guard !head.isEmpty, !tail.isEmpty else { return nil }
        return (String(head), String(tail))
    }

    /// Bytes written as hex digits (either case); nil for an odd count or a non-hex digit.
    static func hexBytes(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[i]), let low = hexValue(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: return digit - 0x30
        case 0x41...0x46: return digit - 0x41 + 10
        case 0x61...0x66: return digit - 0x61 + 10
        default: return nil
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
