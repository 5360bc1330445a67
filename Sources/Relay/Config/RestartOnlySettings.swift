import Logging

/// Settings a running server cannot change on SIGHUP: they shape sockets, threads and
/// processes set up once at start. A reload that changes one keeps the running value and
/// reports the key as "restart needed", never silently ignoring it.
public struct RestartOnlySetting: Sendable {
    public let key: String
    let differs: @Sendable (RelayConfiguration, RelayConfiguration) -> Bool
    let keep: @Sendable (inout RelayConfiguration, RelayConfiguration) -> Void

    init<Value: Equatable & Sendable>(_ key: String, _ path: WritableKeyPath<RelayConfiguration, Value> & Sendable) {
        self.key = key
        differs = { $0[keyPath: path] != $1[keyPath: path] }
        keep = { $0[keyPath: path] = $1[keyPath: path] }
    }

    /// Every restart-only setting, by config key.
    public static var all: [RestartOnlySetting] {
        [
            .init("listening-ip", \.listeningIPs), .init("listening-port", \.listeningPort),
            .init("alt-listening-port", \.altListeningPort), .init("tls-listening-port", \.tlsListeningPort),
            .init("alt-tls-listening-port", \.altTLSListeningPort), .init("no-udp", \.noUDP),
            .init("no-tcp", \.noTCP), .init("no-tls", \.noTLS), .init("relay-ip", \.relayIPs),
            .init("min-port", \.minPort), .init("max-port", \.maxPort), .init("relay-threads", \.relayThreads),
            .init("api-listening-ip", \.apiListeningIP), .init("api-listening-port", \.apiListeningPort),
            .init("prometheus", \.prometheus), .init("prometheus-port", \.prometheusPort),
            .init("prometheus-address", \.prometheusAddress), .init("log-file", \.logFile),
            .init("syslog", \.syslog), .init("simple-log", \.simpleLog), .init("log-format", \.logFormat),
            .init("pidfile", \.pidfile), .init("tcp-idle-timeout", \.tcpIdleTimeout),
            .init("tls-handshake-timeout", \.tlsHandshakeTimeout),
        ]
    }

    /// `candidate` with every restart-only setting put back to its `running` value, and the keys
    /// that the file wanted changed.
    public static func merge(running: RelayConfiguration, candidate: RelayConfiguration) -> (
        RelayConfiguration, restartNeeded: [String]
    ) {
        var merged = candidate
        var keys: [String] = []
        for setting in all where setting.differs(running, candidate) {
            keys.append(setting.key)
            setting.keep(&merged, running)
        }
        return (merged, keys)
    }
}

extension RelayConfiguration {
    /// The level logged: `log-level`, lowered to debug by `verbose`.
    public var logLevel: Logger.Level { verbose ? min(.debug, minimumLogLevel) : minimumLogLevel }
}
