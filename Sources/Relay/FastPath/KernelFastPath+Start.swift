import Glibc
import Logging
import RelayCore
import StunCodec

extension KernelFastPath {
    /// Where relayd looks for its BPF object when `kernel-offload-object` is not set: next to
    /// the executable, in the build tree's `bpf/` folder (scripts/build-bpf.sh), then where the
    /// package installs it.
    static func defaultObjectPaths() -> [String] {
        var candidates: [String] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 {
            let executable = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let directory = String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)])
            candidates += [
                "\(directory)/relayd_fastpath.bpf.o", "\(directory)/../bpf/relayd_fastpath.bpf.o",
                "\(directory)/../../bpf/relayd_fastpath.bpf.o",
            ]
        }
        return candidates + ["/usr/lib/relayd/relayd_fastpath.bpf.o"]
    }

    /// Loads the program and attaches it to the configured interfaces (default: those carrying a
    /// listening or relay address). The failure names what failed (a missing object, the
    /// kernel's refusal, missing privileges).
    static func start(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress], logger: Logger)
        throws(RelayServer.StartError) -> KernelFastPath
    {
        let candidates = c.kernelOffloadObject.map { [$0] } ?? defaultObjectPaths()
        guard let path = candidates.first(where: { access($0, R_OK) == 0 }) else {
            throw RelayServer.StartError(
                description:
                    "kernel-offload: no BPF object at \(candidates.joined(separator: ", ")) (build it with scripts/build-bpf.sh, or set kernel-offload-object)"
            )
        }
        let interfaces =
            c.kernelOffloadInterfaces.isEmpty
            ? InterfaceAddresses.names(carrying: c.listeningIPs + c.relayIPs) : c.kernelOffloadInterfaces
        do {
            let fastPath = try KernelFastPath(
                objectPath: path, localAddresses: Set(interfaceAddresses + c.listeningIPs + c.relayIPs),
                egressInterfaces: InterfaceAddresses.indexes())
            for interface in interfaces { try fastPath.attach(interface: interface) }
            let xdp = c.kernelOffloadXDP ? interfaces.filter { fastPath.attachXDP(interface: $0) } : []
            if c.kernelOffloadXDP && xdp.isEmpty {
                logger.warning(
                    "kernel-offload-xdp: no interface has native XDP; the TC program relays alone",
                    metadata: ["event": "fastpath_xdp_unavailable", "interfaces": "\(interfaces.joined(separator: ","))"])
            }
            logger.info(
                "kernel fast path attached",
                metadata: [
                    "event": "fastpath_attached", "object": "\(path)", "interfaces": "\(interfaces.joined(separator: ","))",
                    "attach": "\(fastPath.attachMode)", "xdp": "\(xdp.isEmpty ? "-" : xdp.joined(separator: ","))",
                ])
            return fastPath
        } catch {
            throw RelayServer.StartError(description: "kernel-offload: \(error.description)")
        }
    }

    /// Whether offload would work here with `configuration`: loads the program into the kernel
    /// and unloads it again, attaching nothing (`check-config`). Nil when it would, else why not.
    static func probe(configuration c: RelayConfiguration) -> String? {
        let candidates = c.kernelOffloadObject.map { [$0] } ?? defaultObjectPaths()
        guard let path = candidates.first(where: { access($0, R_OK) == 0 }) else {
            return "no BPF object at \(candidates.joined(separator: ", "))"
        }
        do {
            _ = try KernelFastPath(objectPath: path, localAddresses: [])
            return nil
        } catch {
            return error.description
        }
    }
}

/// `check-config`'s question about `kernel-offload`, public for the executable.
public enum KernelOffloadProbe {
    /// Nil when the BPF program loads into this kernel with this configuration, else why not.
    public static func problem(configuration: RelayConfiguration) -> String? {
        KernelFastPath.probe(configuration: configuration)
    }
}
