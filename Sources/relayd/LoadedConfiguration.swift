import ArgumentParser
import Foundation
import Relay

/// Loads the configuration from `-c FILE` plus long options, or exits with the error naming
/// file, line and key.
enum LoadedConfiguration {
    static func load(_ options: [String]) throws -> ConfigLoadResult {
        do {
            return try RelayConfiguration.load(arguments: options)
        } catch {
            FileHandle.standardError.write(Data("relayd: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}
