import Logging

/// Settings a running server cannot change on SIGHUP: they shape sockets, threads and
/// processes set up once at start. A reload that changes one keeps the running value and
/// reports the key as "restart needed", never silently ignoring it.
public struct RestartOnlySetting: Sendable {
    public let key: String
    let field: ConfigField

    /// Every restart-only setting, by config key: the keys `ConfigKeyTable` marks `needsRestart()`.
    public static let all: [RestartOnlySetting] = ConfigKeyTable.implemented.compactMap { key in
        guard key.restartOnly, let field = key.field else { return nil }
        return RestartOnlySetting(key: key.name, field: field)
    }

    /// `candidate` with every restart-only setting put back to its `running` value, and the keys
    /// that the file wanted changed.
    public static func merge(running: RelayConfiguration, candidate: RelayConfiguration) -> (
        RelayConfiguration, restartNeeded: [String]
    ) {
        var merged = candidate
        var keys: [String] = []
        for setting in all where setting.field.differs(running, candidate) {
            keys.append(setting.key)
            setting.field.keep(&merged, running)
        }
        return (merged, keys)
    }
}

extension RelayConfiguration {
    /// The level logged: `log-level`, lowered to debug by `verbose`.
    public var logLevel: Logger.Level { verbose ? min(.debug, minimumLogLevel) : minimumLogLevel }
}
