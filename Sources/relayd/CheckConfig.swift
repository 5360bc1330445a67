import ArgumentParser
import Relay

/// `relayd check-config -c FILE`: validates the configuration and prints the effective values,
/// secrets masked.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config", abstract: "Validate a configuration and print the effective values (secrets masked).")

    @Argument(parsing: .allUnrecognized, help: "-c FILE and coturn-style --key[=value] options.")
    var options: [String] = []

    func run() throws {
        let loaded = try LoadedConfiguration.load(options)
        for warning in loaded.warnings { print("warning: \(warning)") }
        for (key, value) in loaded.configuration.redactedSummary() { print("\(key)=\(value)") }
    }
}
