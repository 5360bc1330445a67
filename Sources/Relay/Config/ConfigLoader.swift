import Foundation

/// A loaded configuration and what the operator should be told about it.
public struct ConfigLoadResult: Sendable, Equatable {
    public var configuration: RelayConfiguration
    /// One line each, naming file and line (or `command line`) and the key.
    public var warnings: [String]
    /// The configuration file that was read, if any.
    public var configFile: String?

    public init(configuration: RelayConfiguration, warnings: [String], configFile: String?) {
        self.configuration = configuration
        self.warnings = warnings
        self.configFile = configFile
    }
}

extension RelayConfiguration {
    /// Reads the file named by `-c FILE` / `--config FILE` (none without it, or with `-n`), applies
    /// the other arguments over it and checks the result. `arguments` excludes the program name.
    public static func load(arguments: [String]) throws(ConfigError) -> ConfigLoadResult {
        let commandLine = try ConfigCommandLine.parse(arguments)
        guard !commandLine.noConfigFile, let path = commandLine.configFile else {
            return try assemble(file: [], commandLine: commandLine, configFile: nil)
        }
        let text = try readFile(path)
        return try assemble(
            file: ConfigFileParser.parse(text, fileName: path), commandLine: commandLine, configFile: path)
    }

    /// As `load(arguments:)`, with the file's text given (a `-c` argument is ignored, `-n` drops the text).
    public static func load(fileText: String, fileName: String, arguments: [String] = []) throws(ConfigError)
        -> ConfigLoadResult
    {
        let commandLine = try ConfigCommandLine.parse(arguments)
        guard !commandLine.noConfigFile else {
            return try assemble(file: [], commandLine: commandLine, configFile: nil)
        }
        let entries = try ConfigFileParser.parse(fileText, fileName: fileName)
        return try assemble(file: entries, commandLine: commandLine, configFile: fileName)
    }

    private static func assemble(
        file: [ConfigEntry], commandLine: ConfigCommandLine, configFile: String?
    ) throws(ConfigError) -> ConfigLoadResult {
        var output = try ConfigAssembler.assemble(file: file, commandLine: commandLine.entries)
        try ConfigValidator.validate(&output.configuration, sources: output.sources, warnings: &output.warnings)
        try TenantLoader.load(&output.configuration, mainFile: configFile, sources: output.sources)
        return ConfigLoadResult(configuration: output.configuration, warnings: output.warnings, configFile: configFile)
    }

    static func readFile(_ path: String) throws(ConfigError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .unreadableFile(path, reason: "no such file")
        }
        guard !isDirectory.boolValue else { throw .unreadableFile(path, reason: "is a directory") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableFile(path, reason: "not readable")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .unreadableFile(path, reason: "not UTF-8 text")
        }
        return text
    }
}
