import CBPF
import CRelayFastPath
import Glibc
import RelayCore
import StunCodec

/// The kernel fast path (docs/kernel-fast-path.md): relayd's BPF program loaded into the kernel,
/// its maps, and the interfaces it is attached to. relayd stays the control plane: the core's
/// `installChannel`/`removeChannel` commands become map entries, each with the expiry the
/// program checks itself, and the entries' counters are read back into the allocation's.
///
/// A route is offloaded when its client, server, relayed and peer addresses are of one family
/// (IPv4 or IPv6); a route that changes family (RFC 6156) keeps the user-space path. A packet
/// for this host continues up the stack; one for another host leaves by the interface that
/// carries its new source address.
///
/// Shared by every loop thread: the map calls are system calls the kernel serializes, and the
/// attachments change only at start and at deinit.
package final class KernelFastPath: @unchecked Sendable {
    /// Why the program could not be loaded, attached or test-run, in words for the log.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// What one route relayed in the kernel, each way: counted as an allocation's traffic is.
    package typealias Counters = TrafficCounters

    private let object: OpaquePointer
    /// The loaded object, for the handover's map lookups.
    var objectPointer: OpaquePointer { object }
    package let programDescriptor: Int32
    /// The XDP program (`relayd_xdp`), which relays what it can finish itself and leaves the
    /// rest to the TC program (docs/kernel-fast-path.md).
    package let xdpProgramDescriptor: Int32

    /// The link-layer addresses the XDP program writes for a destination: its next hop's and the
    /// egress interface's.
    package struct LinkLayer {
        package var nextHop: [UInt8]
        package var egress: [UInt8]
        package init(nextHop: [UInt8], egress: [UInt8]) {
            self.nextHop = nextHop
            self.egress = egress
        }
    }

    /// Where a route's link-layer addresses come from: given the destination and the egress
    /// interface's index. Nil (the default, while no XDP program is attached) leaves every packet
    /// to the TC program. Set at start, before any route is installed.
    package var linkLayer: @Sendable (IPAddress, UInt32) -> LinkLayer? = { _, _ in nil }
    /// The XDP links (closing one's descriptor detaches the program), with their interfaces.
    let xdpLinks = Locked<[XDPLink]>([])

    struct XDPLink: Sendable {
        var ifindex: Int32
        var descriptor: Int32
    }
    /// Whether an XDP program is attached anywhere (routes then carry link-layer addresses).
    var xdpAttached: Bool { !xdpLinks.withLock { $0.isEmpty } }
    /// The route and counter maps of each family.
    let ipv4Maps: RouteMaps
    let ipv6Maps: RouteMaps
    private let stats: Int32
    let possibleCPUs: Int
    /// The host's own addresses: a rewritten packet for one of them (or a loopback address) is
    /// delivered by the stack.
    let localAddresses: Set<IPAddress>
    /// The interface carrying each of the host's addresses: a rewritten packet for another host
    /// leaves by the one that carries its new source address.
    let egressInterfaces: [IPAddress: UInt32]
    /// How the program hangs on an interface: a tcx link (its descriptor; closing it detaches),
    /// or a classic clsact filter (removed by handle at shutdown).
    enum Attachment {
        case link(ifindex: Int32, descriptor: Int32)
        case filter(ifindex: Int32, createdHook: Bool)
    }
    var attachments: [Attachment] = []

    /// Loads the BPF object at `objectPath` (built by scripts/build-bpf.sh) into the kernel.
    /// Needs CAP_BPF and CAP_NET_ADMIN (root).
    /// `reusing`: maps by name that the program uses instead of creating its own (a live
    /// upgrade's, docs/live-upgrade.md); their descriptors stay the caller's.
    package init(
        objectPath: String, localAddresses: Set<IPAddress>, egressInterfaces: [IPAddress: UInt32] = [:],
        reusing maps: [String: Int32] = [:]
    ) throws(Failure) {
        self.localAddresses = localAddresses
        self.egressInterfaces = egressInterfaces
        let object = try Self.loadObject(objectPath, reusing: maps)
        func map(_ name: String) -> Int32 {
            bpf_object__find_map_by_name(object, name).map { bpf_map__fd($0) } ?? -1
        }
        let program = bpf_object__find_program_by_name(object, "relayd_ingress")
        programDescriptor = program.map { bpf_program__fd($0) } ?? -1
        xdpProgramDescriptor = bpf_object__find_program_by_name(object, "relayd_xdp").map { bpf_program__fd($0) } ?? -1
        ipv4Maps = RouteMaps(
            channels: map("relayd_channels_v4"), peers: map("relayd_peers_v4"),
            channelCounters: map("relayd_channel_counters_v4"), peerCounters: map("relayd_peer_counters_v4"))
        ipv6Maps = RouteMaps(
            channels: map("relayd_channels_v6"), peers: map("relayd_peers_v6"),
            channelCounters: map("relayd_channel_counters_v6"), peerCounters: map("relayd_peer_counters_v6"))
        stats = map("relayd_stats")
        possibleCPUs = Int(libbpf_num_possible_cpus())
        self.object = object
        guard programDescriptor >= 0, xdpProgramDescriptor >= 0, ipv4Maps.isComplete, ipv6Maps.isComplete, stats >= 0, possibleCPUs > 0
        else {
            bpf_object__close(object)
            throw Failure(description: "\(objectPath) is not relayd's fast path program")
        }
    }

    deinit {
        detachAll()
        bpf_object__close(object)
    }

    /// Takes the program off every interface it was attached to (and the clsact hooks this
    /// process created); called at shutdown. A tcx link also goes when the process dies.
    package func detachAll() {
        for link in xdpLinks.withLock({ links in defer { links.removeAll() }; return links }) { close(link.descriptor) }
        for attachment in attachments {
            switch attachment {
            case .link(_, let descriptor): close(descriptor)
            case .filter(let ifindex, let createdHook): _ = relayd_tc_detach_ingress(ifindex, createdHook ? 1 : 0)
            }
        }
        attachments.removeAll()
    }

    /// Attaches the program to the ingress of interface `name`: as a tcx link where the kernel
    /// has them (Linux 6.6), which the kernel removes with the process however it ends; else as a
    /// clsact filter, which replaces a stale one left by an earlier relayd. A stale filter is
    /// removed in the first case too, so an older relayd's program cannot run in front.
    func attach(interface name: String) throws(Failure) {
        let ifindex = Int32(bitPattern: if_nametoindex(name))
        guard ifindex > 0 else { throw Failure(description: "no interface \(name)") }
        let link = relayd_tcx_attach_ingress(ifindex, programDescriptor)
        if link >= 0 {
            _ = relayd_tc_detach_ingress(ifindex, 0)
            attachments.append(.link(ifindex: ifindex, descriptor: link))
            return
        }
        var created: Int32 = 0
        let result = relayd_tc_attach_ingress(ifindex, programDescriptor, &created)
        guard result == 0 else {
            throw Failure(description: "cannot attach to \(name): \(String(cString: strerror(-result)))")
        }
        attachments.append(.filter(ifindex: ifindex, createdHook: created != 0))
    }

    /// Runs `program` (`programDescriptor` or `xdpProgramDescriptor`) `count` times over `packet`
    /// with BPF_PROG_TEST_RUN: its verdict, the packet it left, and the kernel's mean time per
    /// run in nanoseconds (used by the tests and by fastpath-bench).
    package func testRun(_ program: Int32, _ packet: [UInt8], repeat count: UInt32 = 1) throws(Failure)
        -> (verdict: UInt32, packet: [UInt8], nanoseconds: UInt32)
    {
        var out = [UInt8](repeating: 0, count: 4096)
        var length: UInt32 = 0
        var verdict: UInt32 = 0
        var duration: UInt32 = 0
        let result = packet.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { output in
                relayd_prog_test_run(
                    program, input.baseAddress, UInt32(input.count), output.baseAddress, UInt32(output.count), count,
                    &length, &verdict, &duration)
            }
        }
        guard result == 0 else { throw Failure(description: "test run: \(String(cString: strerror(-result)))") }
        return (verdict, Array(out[0..<Int(length)]), duration)
    }

    /// "tcx" or "clsact": how the program was attached (the first interface's way).
    var attachMode: String {
        switch attachments.first {
        case .link: "tcx"
        case .filter: "clsact"
        case nil: "none"
        }
    }

    /// The program's per-reason packet counts (`relayd_fastpath_stat`), summed over the CPUs.
    package func statistics() -> [UInt64] {
        (0..<Int(RELAYD_STAT_COUNT.rawValue)).map { index in
            var key = UInt32(index)
            var values = [UInt64](repeating: 0, count: possibleCPUs)
            let found = values.withUnsafeMutableBytes { bpf_map_lookup_elem(stats, &key, $0.baseAddress) } == 0
            return found ? values.reduce(0, &+) : 0
        }
    }
}
