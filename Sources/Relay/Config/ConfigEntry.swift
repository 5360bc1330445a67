/// One `key[=value]` as written in a configuration file or on the command line, before it is interpreted.
public struct ConfigEntry: Hashable, Sendable {
    /// The key's long name, without leading dashes (short options are already mapped to it).
    public var key: String
    /// The value text (quotes removed); nil when the key stood alone, as flags do.
    public var value: String?
    /// Where the entry was written.
    public var source: ConfigSource

    public init(key: String, value: String?, source: ConfigSource) {
        self.key = key
        self.value = value
        self.source = source
    }
}
