/// Interprets entries from the file and the command line into one configuration.
///
/// The command line overrides the file: a single-valued key given on the command line wins, and
/// a repeatable key given there at all replaces the file's list. Within one source the last
/// value of a single-valued key wins (with a warning).
enum ConfigAssembler {
    struct Output {
        var configuration: RelayConfiguration
        var warnings: [String]
        /// Where each key that took effect was set, in order (one source per element of a list).
        var sources: [String: [ConfigSource]]
    }

    static func assemble(file: [ConfigEntry], commandLine: [ConfigEntry]) throws(ConfigError) -> Output {
        var warnings: [String] = []
        let fromFile = try resolve(file, warnings: &warnings)
        let fromCommandLine = try resolve(commandLine, warnings: &warnings)

        // Every value is checked, even one the command line overrides.
        var scratch = RelayConfiguration()
        for (key, entry) in fromFile + fromCommandLine { try apply(key, entry, to: &scratch) }

        let overridden = Set(fromCommandLine.map(\.key.name))
        var configuration = RelayConfiguration()
        var sources: [String: [ConfigSource]] = [:]
        for (key, entry) in fromFile.filter({ !overridden.contains($0.key.name) }) + fromCommandLine {
            try apply(key, entry, to: &configuration)
            sources[key.name, default: []].append(entry.source)
        }
        return Output(configuration: configuration, warnings: warnings, sources: sources)
    }

    /// Looks every entry's key up; warns about unimplemented keys and repeated single-valued keys
    /// and returns the entries that set something.
    private static func resolve(
        _ entries: [ConfigEntry], warnings: inout [String]
    ) throws(ConfigError) -> [(key: ConfigKey, entry: ConfigEntry)] {
        var resolved: [(key: ConfigKey, entry: ConfigEntry)] = []
        var firstSeen: [String: ConfigSource] = [:]
        for entry in entries {
            guard let key = ConfigKeyTable.key(named: entry.key) else { throw .unknownKey(entry.key, at: entry.source) }
            switch key.support {
            case .ignored:
                continue
            case .unimplemented(let hint):
                let note = hint.map { " (\($0))" } ?? ""
                warnings.append(
                    "\(entry.source): key '\(key.name)' is a coturn option relayd does not implement; ignored\(note)")
                continue
            case .implemented:
                break
            }
            if !key.repeatable {
                if let earlier = firstSeen[key.name] {
                    warnings.append("\(entry.source): key '\(key.name)' repeats \(place(earlier)); the last value wins")
                } else {
                    firstSeen[key.name] = entry.source
                }
            }
            resolved.append((key, entry))
        }
        return resolved
    }

    private static func apply(_ key: ConfigKey, _ entry: ConfigEntry, to configuration: inout RelayConfiguration)
        throws(ConfigError)
    {
        guard case .implemented(let setter) = key.support else { return }
        do {
            try setter(&configuration, entry.value)
        } catch {
            if error.missing { throw .missingValue(key.name, at: entry.source, expected: error.expected) }
            throw .invalidValue(
                key.name, at: entry.source, expected: error.expected, value: key.isSecret ? nil : entry.value)
        }
    }

    private static func place(_ source: ConfigSource) -> String {
        switch source {
        case .file(_, let line): return "line \(line)"
        case .commandLine: return "an earlier argument"
        }
    }
}
