import ArgumentParser
import Foundation
import Logging
import Relay

/// Runs the daemon (the default subcommand).
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay: relayd -c conf/relayd.conf [--key=value ...]",
        discussion: """
            Options are coturn turnserver.conf keys given as long options, e.g. --listening-port=3478 \
            --use-auth-secret --static-auth-secret=...; -c FILE names the config file.
            """
    )

    @Flag(
        name: .customLong("self-test"),
        help: "Once started, send a STUN Binding from each relay address to the UDP listener and log the result.")
    var selfTest = false

    @Argument(parsing: .allUnrecognized, help: "-c FILE and coturn-style --key[=value] options.")
    var options: [String] = []

    func run() throws {
        let loaded = try LoadedConfiguration.load(options)
        let logging = RelaydLogging.makeRelaydLogger(configuration: loaded.configuration)
        defer { logging.flushLogFile() }
        let logger = logging.logger
        let interfaces = InterfaceAddresses.current()
        DescriptorBudget.raiseSoftLimit()
        let descriptors = DescriptorBudget(configuration: loaded.configuration.resolvingAddresses(interfaces: interfaces))
        let warnings =
            loaded.warnings + logging.notes + ConfigAdvisor.warnings(for: loaded.configuration, interfaceAddresses: interfaces)
            + (descriptors.warning.map { [$0] } ?? [])
        for warning in warnings { logger.warning("\(warning)", metadata: ["event": "config_warning"]) }
        // Started by a running relayd for a live upgrade: its sockets and state first
        // (docs/live-upgrade.md).
        let inheritance: Inheritance?
        do {
            inheritance = try RelayServer.inherit(configuration: loaded.configuration)
        } catch {
            logger.critical("\(error.description)", metadata: ["event": "start_failed"])
            throw ExitCode(1)
        }
        let pidfile = PIDFile(path: loaded.configuration.pidfile)
        // An heir writes the pid file once it serves: until then it is the running relayd's.
        if inheritance == nil { try pidfile.write() }
        let server = RelayServer(configuration: loaded.configuration, logger: logger, inheritance: inheritance)
        // After a live upgrade the pid file names the heir.
        defer { if !server.handedOver { pidfile.remove() } }
        server.reloadArguments = options
        server.onReload = logging.reopenLogFile
        let configuration = loaded.configuration
        let selfTest = selfTest
        server.onStarted = {
            if inheritance != nil { try? pidfile.write() }
            if selfTest {
                StartupSelfTest.launch(configuration: configuration, interfaceAddresses: interfaces, logger: logger)
            }
        }
        do {
            try server.run()
        } catch {
            logger.critical("\(error.description)", metadata: ["event": "start_failed"])
            throw ExitCode(1)
        }
    }
}
