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

    init(
        _ name: String, _ type: ConfigValueType, arity: Arity = .required, repeatable: Bool = false,
        secret: Bool = false, support: Support
    ) {
        self.name = name
        self.type = type
        self.arity = arity
        self.repeatable = repeatable
        self.isSecret = secret
        self.support = support
    }
}

extension ConfigKey {
    typealias Field<Value> = WritableKeyPath<RelayConfiguration, Value> & Sendable

    static func flag(_ name: String, _ field: Field<Bool>) -> ConfigKey {
        ConfigKey(
            name, .flag, arity: .optional,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.bool(text)
            })
    }

    /// A flag that turns `field` off when set (`tlsv1` clears `noTLSv1`).
    static func inverseFlag(_ name: String, _ field: Field<Bool>) -> ConfigKey {
        ConfigKey(
            name, .flag, arity: .optional,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = !(try ConfigValueParser.bool(text))
            })
    }

    static func port(_ name: String, _ field: Field<UInt16>) -> ConfigKey {
        ConfigKey(
            name, .port,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.port(text)
            })
    }

    static func portOrZero(_ name: String, _ field: Field<UInt16?>) -> ConfigKey {
        ConfigKey(
            name, .portOrZero,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.portOrZero(text)
            })
    }

    /// An integer; when `bare` is given the key may stand alone and means that value (coturn's lifetimes).
    static func integer(_ name: String, _ range: ClosedRange<Int>, _ field: Field<Int>, bare: Int? = nil) -> ConfigKey {
        ConfigKey(
            name, .integer(range), arity: bare == nil ? .required : .optional,
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
            name, .string(maxLength: maxLength),
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.string(text, maxLength: maxLength)
            })
    }

    static func string(_ name: String, _ field: Field<String?>, secret: Bool = false) -> ConfigKey {
        ConfigKey(
            name, .string(maxLength: 4096), secret: secret,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.string(text)
            })
    }

    static func address(_ name: String, _ field: Field<IPAddress>) -> ConfigKey {
        ConfigKey(
            name, .ipAddress,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.ipAddress(text)
            })
    }

    static func address(_ name: String, _ field: Field<IPAddress?>) -> ConfigKey {
        ConfigKey(
            name, .ipAddress,
            support: .implemented { config, text throws(ConfigValueError) in
                config[keyPath: field] = try ConfigValueParser.ipAddress(text)
            })
    }

    /// A repeatable key; each use appends one parsed value to `field`.
    static func list<Element>(
        _ name: String, _ type: ConfigValueType, _ field: Field<[Element]>, secret: Bool = false,
        parse: @escaping @Sendable (String?) throws(ConfigValueError) -> Element
    ) -> ConfigKey {
        ConfigKey(
            name, type, repeatable: true, secret: secret,
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
