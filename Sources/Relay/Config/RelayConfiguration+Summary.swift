extension RelayConfiguration {
    /// What stands in for a secret in summaries.
    public static let redaction = "***"

    /// The effective configuration as `(key, value)` pairs under coturn's key names, in the order
    /// of `ConfigKeyTable`, one pair per list element, unset optional values left out. Secrets,
    /// passwords, keys and API tokens appear as `***`, so the result is safe to log.
    public func redactedSummary() -> [(key: String, value: String)] {
        ConfigKeyTable.implemented.flatMap { key in
            (key.field?.show(self) ?? []).map { (key: key.name, value: $0) }
        }
    }

    /// Every key that can appear in `redactedSummary()`.
    public static var summaryKeys: [String] { ConfigKeyTable.implemented.filter { $0.field != nil }.map(\.name) }
}
