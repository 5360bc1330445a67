import StunCodec

/// One key of `turnserver.conf` (and long option of the command line): whether it takes a
/// value, of what type, whether it may repeat, and what it does to the configuration.
struct ConfigKey: Sendable {
    /// Whether the key is followed by a value.
    enum Arity: Hashable, Sendable {
        /// Never needs one; `key=value` is still accepted (booleans, optional text).
        case optional
        /// Always needs one; on the command line `--key value` takes the next argument.
        case required
    }

    /// What relayd does with the key.
    enum Support: Sendable {
        /// Sets part of the configuration.
        case implemented(Setter)
        /// A coturn key relayd does not implement: a warning, with a hint when there is one.
        case unimplemented(hint: String?)
        /// Accepted and ignored without a word (`no-cli`, old TLS spellings).
        case ignored
    }

    typealias Setter = @Sendable (inout RelayConfiguration, String?) throws(ConfigValueError) -> Void

    let name: String
    let type: ConfigValueType
    let arity: Arity
    /// Repeats add values (and a command-line use replaces the file's list) instead of overriding.
    let repeatable: Bool
    /// Values are never echoed in messages or summaries.
    let isSecret: Bool
    let support: Support
    /// The setting the key writes, for the summary and for reloads; nil for aliases and for keys
    /// that set nothing (another key names the setting).
    let field: ConfigField?
    /// A running server cannot change it on SIGHUP (sockets, threads, the process).
    private(set) var restartOnly = false

    init(
        _ name: String, _ type: ConfigValueType, arity: Arity = .required, repeatable: Bool = false,
        secret: Bool = false, field: ConfigField? = nil, support: Support
    ) {
        self.name = name
        self.type = type
        self.arity = arity
        self.repeatable = repeatable
        self.isSecret = secret
        self.field = field
        self.support = support
    }

    /// The same key, marked as needing a restart to change.
    func needsRestart() -> ConfigKey {
        var key = self
        key.restartOnly = true
        return key
    }
}

/// The part of `RelayConfiguration` one key sets: how its value reads in the summary (secrets
/// masked; nothing when unset) and how a reload compares and keeps it. Built from the key path
/// once, so a key is described in one place (`ConfigKeyTable`).
struct ConfigField: Sendable {
    let show: @Sendable (RelayConfiguration) -> [String]
    let differs: @Sendable (RelayConfiguration, RelayConfiguration) -> Bool
    let keep: @Sendable (inout RelayConfiguration, RelayConfiguration) -> Void

    init<Value: Equatable & Sendable>(
        _ path: WritableKeyPath<RelayConfiguration, Value> & Sendable,
        show: @escaping @Sendable (Value) -> [String]
    ) {
        self.show = { show($0[keyPath: path]) }
        differs = { $0[keyPath: path] != $1[keyPath: path] }
        keep = { $0[keyPath: path] = $1[keyPath: path] }
    }

    /// One value, as it prints.
    static func value<Value: Equatable & Sendable & CustomStringConvertible>(
        _ path: WritableKeyPath<RelayConfiguration, Value> & Sendable
    ) -> ConfigField {
        ConfigField(path) { [$0.description] }
    }

    /// An optional value: nothing while unset.
    static func optional<Value: Equatable & Sendable & CustomStringConvertible>(
        _ path: WritableKeyPath<RelayConfiguration, Value?> & Sendable, secret: Bool = false
    ) -> ConfigField {
        ConfigField(path) { value in value.map { [secret ? RelayConfiguration.redaction : $0.description] } ?? [] }
    }

    /// A list: one line per element.
    static func list<Element: Equatable & Sendable>(
        _ path: WritableKeyPath<RelayConfiguration, [Element]> & Sendable,
        show: @escaping @Sendable (Element) -> String
    ) -> ConfigField {
        ConfigField(path) { $0.map(show) }
    }
}

extension ConfigKey {
    typealias Field<Value> = WritableKeyPath<RelayConfiguration, Value> & Sendable

    /// A key naming a file a secret is read from (`SecretFile`): the path is the setting shown
    /// and compared; `apply` puts the file's values (exactly one with `single`) where the secret
    /// itself would go. The file is read at each load, so SIGHUP reads it again.
    static func secretFile(
        _ name: String, _ field: Field<String?>, single: Bool = false,
        apply: @escaping @Sendable (inout RelayConfiguration, [String]) throws(ConfigValueError) -> Void
    ) -> ConfigKey {
        ConfigKey(
            name, .secretFile, field: .optional(field),
            support: .implemented { config, text throws(ConfigValueError) in
                let values = single ? [try SecretFile.value(text)] : try SecretFile.values(text)
                config[keyPath: field] = text
                try apply(&config, values)
            })
    }

    static func flag(_ name: String, _ field: Field<Bool>, alias: Bool = false) -> ConfigKey {
        ConfigKey(
            name, .flag, arity: .optional, field: alias ? nil : .value(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.bool(text)
            })
    }

    /// A flag that turns `field` off when set (`tlsv1` clears `noTLSv1`).
    /// An alias of the `field` key: not listed in the summary of its own.
    static func inverseFlag(_ name: String, _ field: Field<Bool>) -> ConfigKey {
        ConfigKey(
            name, .flag, arity: .optional,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = !(try ConfigValueParser.bool(text))
            })
    }

    static func port(_ name: String, _ field: Field<UInt16>) -> ConfigKey {
        ConfigKey(
            name, .port, field: .value(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.port(text)
            })
    }

    static func portOrZero(_ name: String, _ field: Field<UInt16?>) -> ConfigKey {
        ConfigKey(
            name, .portOrZero, field: .optional(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.portOrZero(text)
            })
    }

    /// An integer; when `bare` is given the key may stand alone and means that value (coturn's lifetimes).
    static func integer(_ name: String, _ range: ClosedRange<Int>, _ field: Field<Int>, bare: Int? = nil) -> ConfigKey {
        ConfigKey(
            name, .integer(range), arity: bare == nil ? .required : .optional, field: .value(field),
            support: .implemented { config, text throws(ConfigValueError) in
                if let bare, text == nil || text == "" {
                    config[keyPath: field] = bare
                } else {
                    config[keyPath: field] = try ConfigValueParser.integer(text, in: range)
                }
            })
    }

    static func string(_ name: String, _ field: Field<String>, maxLength: Int = 4096) -> ConfigKey {
        ConfigKey(
            name, .string(maxLength: maxLength), field: .value(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.string(text, maxLength: maxLength)
            })
    }

    static func string(_ name: String, _ field: Field<String?>, secret: Bool = false, alias: Bool = false) -> ConfigKey {
        ConfigKey(
            name, .string(maxLength: 4096), secret: secret, field: alias ? nil : .optional(field, secret: secret),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.string(text)
            })
    }

    static func address(_ name: String, _ field: Field<IPAddress>) -> ConfigKey {
        ConfigKey(
            name, .ipAddress, field: .value(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.ipAddress(text)
            })
    }

    static func address(_ name: String, _ field: Field<IPAddress?>) -> ConfigKey {
        ConfigKey(
            name, .ipAddress, field: .optional(field),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.ipAddress(text)
            })
    }

    /// A repeatable key; each use appends one parsed value to `field`. `show` prints one
    /// element (secrets masked: a secret list shows only `***`, unless `show` says better).
    static func list<Element: Equatable & Sendable>(
        _ name: String, _ type: ConfigValueType, _ field: Field<[Element]>, secret: Bool = false,
        show: (@Sendable (Element) -> String)? = nil,
        parse: @escaping @Sendable (String?) throws(ConfigValueError) -> Element
    ) -> ConfigKey {
        let shown: @Sendable (Element) -> String
        if let show {
            shown = show
        } else if secret {
            shown = { _ in RelayConfiguration.redaction }
        } else {
            shown = { element in String(describing: element) }
        }
        return ConfigKey(
            name, type, repeatable: true, secret: secret, field: .list(field, show: shown),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field].append(try parse(text))
            })
    }

    /// A coturn key relayd knows but does not implement.
    static func unimplemented(_ name: String, arity: Arity = .optional, hint: String? = nil) -> ConfigKey {
        ConfigKey(name, .ignored, arity: arity, repeatable: true, support: .unimplemented(hint: hint))
    }

    /// A key accepted as a no-op without a warning.
    static func ignored(_ name: String) -> ConfigKey {
        ConfigKey(name, .ignored, arity: .optional, repeatable: true, support: .ignored)
    }
}
