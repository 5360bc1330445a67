import Glibc
import FastPath
import Logging
import StunCodec

extension KernelFastPath {
    /// Loads the program and attaches it to the configured interfaces (default: those carrying a
    /// listening or relay address); with `handed` (a live upgrade's heir), loads it over the
    /// running relayd's maps and swaps it into its links instead (docs/live-upgrade.md, "Kernel
    /// fast path"). The failure names what failed (a missing object, the kernel's refusal,
    /// missing privileges, interfaces that differ from the running relayd's).
    static func start(
        configuration c: RelayConfiguration, interfaceAddresses: [IPAddress], taking handed: Handover? = nil,
        logger: Logger
    ) throws(RelayServer.StartError) -> KernelFastPath {
        let (found, candidates) = locateObject(configured: c.kernelOffloadObject)
        guard let path = found else {
            if let handed { for fd in Array(handed.links.values) + Array(handed.xdpLinks.values) { close(fd) } }
            throw RelayServer.StartError(
                description:
                    "kernel-offload: no BPF object at \(candidates.joined(separator: ", ")) (build it with scripts/build-bpf.sh, or set kernel-offload-object)"
            )
        }
        let interfaces =
            c.kernelOffloadInterfaces.isEmpty
            ? InterfaceAddresses.names(carrying: c.listeningIPs + c.relayIPs) : c.kernelOffloadInterfaces
        let localAddresses = Set(interfaceAddresses + c.listeningIPs + c.relayIPs)
        do {
            if let handed {
                return try takeOver(
                    handed, objectPath: path, interfaces: interfaces, localAddresses: localAddresses,
                    egressInterfaces: InterfaceAddresses.indexes(), logger: logger)
            }
            return try start(
                objectPath: path, interfaces: interfaces, localAddresses: localAddresses,
                egressInterfaces: InterfaceAddresses.indexes(), xdp: c.kernelOffloadXDP, logger: logger)
        } catch {
            throw RelayServer.StartError(description: "kernel-offload: \(error.description)")
        }
    }
}

/// `check-config`'s question about `kernel-offload`, public for the executable.
public enum KernelOffloadProbe {
    /// Nil when the BPF programs load into this kernel with this configuration (the fast path's,
    /// and the RFC 6062 pipes' sockmap program beside it), else why not.
    public static func problem(configuration: RelayConfiguration) -> String? {
        if let problem = KernelFastPath.probe(configuredObject: configuration.kernelOffloadObject) { return problem }
        guard let fastPath = KernelFastPath.locateObject(configured: configuration.kernelOffloadObject).path else {
            return nil
        }
        do {
            _ = try KernelSplice(objectPath: KernelSplice.objectPath(besideFastPath: fastPath))
            return nil
        } catch {
            return "TCP splice: \(error.description)"
        }
    }
}
