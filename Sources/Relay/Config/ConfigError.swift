/// Why a configuration could not be loaded; `description` names the file and line (or
/// `command line`) and the key, e.g. `conf/relayd.conf:12: unknown key 'foo'`.
///
/// Messages never repeat the value of a secret key.
public struct ConfigError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable code for what went wrong.
    public enum Code: String, Hashable, Sendable {
        /// The configuration file could not be read.
        case unreadableFile
        /// A line or argument could not be split into a key and value.
        case malformedEntry
        /// The key (or short option) is not one relayd or coturn knows.
        case unknownKey
        /// A key that needs a value was given none.
        case missingValue
        /// A value does not have the key's type or range.
        case invalidValue
        /// Keys that cannot hold together (e.g. `min-port` above `max-port`).
        case conflict
    }

    public let code: Code
    /// Where the offending entry was written, when one entry is to blame.
    public let source: ConfigSource?
    /// The key concerned, when there is one.
    public let key: String?
    public let description: String

    init(code: Code, source: ConfigSource?, key: String?, message: String) {
        self.code = code
        self.source = source
        self.key = key
        let prefix = source.map { "\($0): " } ?? ""
        let keyPart = key.map { "key '\($0)': " } ?? ""
        description = prefix + keyPart + message
    }

    static func unreadableFile(_ path: String, reason: String) -> ConfigError {
        ConfigError(
            code: .unreadableFile, source: nil, key: nil, message: "\(path): cannot read configuration file (\(reason))"
        )
    }

    static func malformed(_ message: String, at source: ConfigSource, key: String? = nil) -> ConfigError {
        ConfigError(code: .malformedEntry, source: source, key: key, message: message)
    }

    static func unknownKey(_ key: String, at source: ConfigSource) -> ConfigError {
        ConfigError(code: .unknownKey, source: source, key: nil, message: "unknown key '\(key)'")
    }

    static func unknownOption(_ option: String) -> ConfigError {
        ConfigError(code: .unknownKey, source: .commandLine, key: nil, message: "unknown option '\(option)'")
    }

    static func missingValue(_ key: String, at source: ConfigSource, expected: String) -> ConfigError {
        ConfigError(code: .missingValue, source: source, key: key, message: "missing value, expected \(expected)")
    }

    /// A value error; `value` is nil for secret keys so the text is not echoed.
    static func invalidValue(_ key: String, at source: ConfigSource, expected: String, value: String?) -> ConfigError {
        let got = value.map { ", got '\($0)'" } ?? ""
        return ConfigError(code: .invalidValue, source: source, key: key, message: "expected \(expected)\(got)")
    }

    static func conflict(_ message: String, key: String?, at source: ConfigSource?) -> ConfigError {
        ConfigError(code: .conflict, source: source, key: key, message: message)
    }
}
