import Glibc
import Logging
import StunCodec

extension KernelFastPath {
    /// Where relayd looks for its BPF object when none is configured: next to the executable, in
    /// the build tree's `bpf/` folder (scripts/build-bpf.sh), then where the package installs it.
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

    /// The BPF object to load: `configured` if given, else the default places; `path` is the
    /// first of `searched` that is readable, nil if none is.
    package static func locateObject(configured: String?) -> (path: String?, searched: [String]) {
        let candidates = configured.map { [$0] } ?? defaultObjectPaths()
        return (candidates.first(where: { access($0, R_OK) == 0 }), candidates)
    }

    /// Loads the program at `objectPath` and attaches it to `interfaces`, and the XDP program
    /// too where `xdp` is set and the driver has native XDP. The failure names what failed (the
    /// kernel's refusal, missing privileges, an interface).
    package static func start(
        objectPath path: String, interfaces: [String], localAddresses: Set<IPAddress>,
        egressInterfaces: [IPAddress: UInt32], xdp wantsXDP: Bool, logger: Logger
    ) throws(Failure) -> KernelFastPath {
        let fastPath = try KernelFastPath(
            objectPath: path, localAddresses: localAddresses, egressInterfaces: egressInterfaces)
        for interface in interfaces { try fastPath.attach(interface: interface) }
        let xdp = wantsXDP ? interfaces.filter { fastPath.attachXDP(interface: $0) } : []
        if wantsXDP && xdp.isEmpty {
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
    }

    /// Whether offload would work here: loads the program into the kernel and unloads it again,
    /// attaching nothing. Nil when it would, else why not.
    package static func probe(configuredObject: String?) -> String? {
        let (found, searched) = locateObject(configured: configuredObject)
        guard let path = found else { return "no BPF object at \(searched.joined(separator: ", "))" }
        do {
            _ = try KernelFastPath(objectPath: path, localAddresses: [])
            return nil
        } catch {
            return error.description
        }
    }
}
