import ArgumentParser
import Relay

/// `relayd check-config -c FILE [--self-test]`: validates the configuration, prints the effective
/// values (secrets masked), then warnings about likely mistakes. Exits 2 on an invalid
/// configuration (the error names file, line and key), 0 otherwise, warnings or not. With
/// `kernel-offload` on or auto it also says whether the kernel fast path would work here.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration and print the effective values (secrets masked) and warnings.",
        discussion: """
            With --self-test, also sends a STUN Binding request from each relay address to the configured \
            UDP listener (loopback when listening on all addresses) and prints what came back. check-config \
            starts no server: this tests the server already running with this configuration.
            """)

    @Flag(
        name: .customLong("self-test"),
        help: "Send a STUN Binding from each relay address to the running server's configured UDP listener.")
    var selfTest = false

    @Argument(parsing: .allUnrecognized, help: "-c FILE and coturn-style --key[=value] options.")
    var options: [String] = []

    func run() throws {
        let loaded = try LoadedConfiguration.load(options)
        let configuration = loaded.configuration
        print("# \(loaded.configFile.map { "\($0): " } ?? "")configuration is valid; effective values:")
        for (key, value) in configuration.redactedSummary() { print("\(key)=\(value)") }
        let interfaces = InterfaceAddresses.current()
        let warnings =
            loaded.warnings + ConfigAdvisor.warnings(for: configuration, interfaceAddresses: interfaces)
            // Read only here, not at every start: a large or slow database would hold it up.
            + (ConfigAdvisor.userDatabaseWarning(configuration).map { [$0] } ?? [])
        let descriptors = DescriptorBudget(configuration: configuration.resolvingAddresses(interfaces: interfaces))
        for warning in warnings + (descriptors.warning.map { [$0] } ?? []) { print("warning: \(warning)") }
        print(descriptors.summary)
        if configuration.kernelOffload != .off {
            if let problem = KernelOffloadProbe.problem(configuration: configuration) {
                print("kernel-offload: would not work here: \(problem)")
            } else {
                print("kernel-offload: would work here (the BPF program loads into this kernel)")
            }
        }
        if selfTest {
            let results = SelfTest.run(configuration: configuration, interfaceAddresses: interfaces)
            if results.isEmpty { print("self-test: no relay address to test from") }
            for result in results { print(result.summary) }
        }
    }
}
