import ArgumentParser
import Foundation
import Logging
import Relay

/// Runs the daemon (the default subcommand).
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay: relayd -c conf/relayd.conf [--key=value ...]",
        discussion: "Options are coturn turnserver.conf keys given as long options, e.g. --listening-port=3478 --use-auth-secret --static-auth-secret=...; -c FILE names the config file."
    )

    @Argument(parsing: .allUnrecognized, help: "-c FILE and coturn-style --key[=value] options.")
    var options: [String] = []

    func run() throws {
        let loaded = try LoadedConfiguration.load(options)
        let (logger, notes) = RelaydLogging.makeRelaydLogger(configuration: loaded.configuration)
        for warning in loaded.warnings + notes + UnenforcedSettings.warnings(for: loaded.configuration) { logger.warning("\(warning)", metadata: ["event": "config_warning"]) }
        if loaded.configuration.noAuth && !loaded.configuration.stunOnly {
            logger.warning(
                "no-auth without stun-only: anyone can allocate relays on this server",
                metadata: ["event": "config_warning"])
        }
        let pidfile = try PIDFile(path: loaded.configuration.pidfile)
        defer { pidfile.remove() }
        let server = RelayServer(configuration: loaded.configuration, logger: logger)
        do {
            try server.run()
        } catch {
            logger.critical("\(error.description)", metadata: ["event": "start_failed"])
            throw ExitCode(1)
        }
    }
}
