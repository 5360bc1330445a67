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
/// IPv4 routes only for now; an IPv6 route is not installed, and its packets keep the user-space
/// path. A packet for this host continues up the stack; one for another host leaves by the
/// interface that carries its new source address.
///
/// Shared by every loop thread: the map calls are system calls the kernel serializes, and the
/// attachments change only at start and at deinit.
final class KernelFastPath: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What one route relayed in the kernel, each way: counted as an allocation's traffic is.
    typealias Counters = TrafficCounters

    private let object: OpaquePointer
    let programDescriptor: Int32
    private let channels: Int32
    private let peers: Int32
    private let channelCounters: Int32
    private let peerCounters: Int32
    private let stats: Int32
    private let possibleCPUs: Int
    /// The host's own addresses: a rewritten packet for one of them (or a loopback address) is
    /// delivered by the stack.
    let localAddresses: Set<IPAddress>
    /// The interface carrying each of the host's addresses: a rewritten packet for another host
    /// leaves by the one that carries its new source address.
    let egressInterfaces: [IPAddress: UInt32]
    private var attachments: [(ifindex: Int32, createdHook: Bool)] = []

    /// Loads the BPF object at `objectPath` (built by scripts/build-bpf.sh) into the kernel.
    /// Needs CAP_BPF and CAP_NET_ADMIN (root).
    init(objectPath: String, localAddresses: Set<IPAddress>, egressInterfaces: [IPAddress: UInt32] = [:]) throws(Failure) {
        self.localAddresses = localAddresses
        self.egressInterfaces = egressInterfaces
        guard let object = bpf_object__open_file(objectPath, nil), libbpf_get_error(UnsafeRawPointer(object)) == 0 else {
            throw Failure(description: "cannot open BPF object \(objectPath): \(String(cString: strerror(errno)))")
        }
        let loaded = bpf_object__load(object)
        guard loaded == 0 else {
            bpf_object__close(object)
            throw Failure(description: "the kernel refused \(objectPath): \(String(cString: strerror(-loaded)))")
        }
        func map(_ name: String) -> Int32 {
            bpf_object__find_map_by_name(object, name).map { bpf_map__fd($0) } ?? -1
        }
        let program = bpf_object__find_program_by_name(object, "relayd_ingress")
        programDescriptor = program.map { bpf_program__fd($0) } ?? -1
        channels = map("relayd_channels_v4")
        peers = map("relayd_peers_v4")
        channelCounters = map("relayd_channel_counters_v4")
        peerCounters = map("relayd_peer_counters_v4")
        stats = map("relayd_stats")
        possibleCPUs = Int(libbpf_num_possible_cpus())
        self.object = object
        guard programDescriptor >= 0, [channels, peers, channelCounters, peerCounters, stats].allSatisfy({ $0 >= 0 }),
            possibleCPUs > 0
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
    /// process created); called at shutdown, so no stale program outlives relayd.
    func detachAll() {
        for attachment in attachments {
            _ = relayd_tc_detach_ingress(attachment.ifindex, attachment.createdHook ? 1 : 0)
        }
        attachments.removeAll()
    }

    /// Attaches the program to the ingress of interface `name` (TC clsact).
    func attach(interface name: String) throws(Failure) {
        let ifindex = Int32(bitPattern: if_nametoindex(name))
        guard ifindex > 0 else { throw Failure(description: "no interface \(name)") }
        var created: Int32 = 0
        let result = relayd_tc_attach_ingress(ifindex, programDescriptor, &created)
        guard result == 0 else {
            throw Failure(description: "cannot attach to \(name): \(String(cString: strerror(-result)))")
        }
        attachments.append((ifindex, created != 0))
    }

    // MARK: Routes

    /// Installs or refreshes both directions of `route`; false when it cannot be offloaded (not
    /// IPv4 on both sides) or the kernel refused the entry. A refresh keeps the counters.
    @discardableResult
    func install(_ route: ChannelRoute) -> Bool {
        guard let keys = Keys(route) else { return false }
        var channelValue = relayd_channel_value_v4(
            relay_ip: keys.relayIP, peer_ip: keys.peerIP, relay_port: route.relayed.port.bigEndian,
            peer_port: route.peer.port.bigEndian, flags: isLocal(route.peer.ip) ? UInt32(RELAYD_ROUTE_LOCAL) : 0,
            egress_ifindex: egressInterfaces[route.relayed.ip] ?? 0, reserved: 0, expiry: UInt64(max(route.expiry, 0)))
        var peerValue = relayd_peer_value_v4(
            server_ip: keys.serverIP, client_ip: keys.clientIP, server_port: route.server.port.bigEndian,
            client_port: route.client.port.bigEndian, channel: route.number.bigEndian,
            flags: isLocal(route.client.ip) ? UInt16(RELAYD_ROUTE_LOCAL) : 0,
            egress_ifindex: egressInterfaces[route.server.ip] ?? 0, reserved: 0, expiry: UInt64(max(route.expiry, 0)))
        var channelKey = keys.channel
        var peerKey = keys.peer
        // Counters first (kept if present), so the program never relays a packet it cannot count.
        let zero = [relayd_counters](repeating: relayd_counters(), count: possibleCPUs)
        _ = zero.withUnsafeBytes { bpf_map_update_elem(channelCounters, &channelKey, $0.baseAddress, UInt64(BPF_NOEXIST)) }
        _ = zero.withUnsafeBytes { bpf_map_update_elem(peerCounters, &peerKey, $0.baseAddress, UInt64(BPF_NOEXIST)) }
        return bpf_map_update_elem(channels, &channelKey, &channelValue, UInt64(BPF_ANY)) == 0
            && bpf_map_update_elem(peers, &peerKey, &peerValue, UInt64(BPF_ANY)) == 0
    }

    /// Whether the stack delivers a packet for `ip` on this host.
    private func isLocal(_ ip: IPAddress) -> Bool {
        if let v4 = ip.ipv4Value, v4 >> 24 == 127 { return true }
        return localAddresses.contains(ip)
    }

    /// Removes both directions of `route` and returns what they relayed in the kernel.
    @discardableResult
    func remove(_ route: ChannelRoute) -> Counters {
        guard let keys = Keys(route) else { return Counters() }
        var channelKey = keys.channel
        var peerKey = keys.peer
        bpf_map_delete_elem(channels, &channelKey)
        bpf_map_delete_elem(peers, &peerKey)
        let counters = self.counters(channelKey: keys.channel, peerKey: keys.peer)
        bpf_map_delete_elem(channelCounters, &channelKey)
        bpf_map_delete_elem(peerCounters, &peerKey)
        return counters
    }

    /// What `route` relayed in the kernel so far.
    func counters(of route: ChannelRoute) -> Counters {
        guard let keys = Keys(route) else { return Counters() }
        return counters(channelKey: keys.channel, peerKey: keys.peer)
    }

    /// The program's per-reason packet counts (`relayd_fastpath_stat`), summed over the CPUs.
    func statistics() -> [UInt64] {
        (0..<Int(RELAYD_STAT_COUNT.rawValue)).map { index in
            var key = UInt32(index)
            var values = [UInt64](repeating: 0, count: possibleCPUs)
            let found = values.withUnsafeMutableBytes { bpf_map_lookup_elem(stats, &key, $0.baseAddress) } == 0
            return found ? values.reduce(0, &+) : 0
        }
    }

    private func counters(channelKey: relayd_channel_key_v4, peerKey: relayd_peer_key_v4) -> Counters {
        var result = Counters()
        var channelKey = channelKey
        var peerKey = peerKey
        var perCPU = [relayd_counters](repeating: relayd_counters(), count: possibleCPUs)
        if perCPU.withUnsafeMutableBytes({ bpf_map_lookup_elem(channelCounters, &channelKey, $0.baseAddress) }) == 0 {
            for c in perCPU {
                result.packetsToPeer &+= c.packets
                result.bytesToPeer &+= c.bytes
            }
        }
        if perCPU.withUnsafeMutableBytes({ bpf_map_lookup_elem(peerCounters, &peerKey, $0.baseAddress) }) == 0 {
            for c in perCPU {
                result.packetsToClient &+= c.packets
                result.bytesToClient &+= c.bytes
            }
        }
        return result
    }

    /// A route's map keys, with the addresses in network byte order; nil unless all four
    /// addresses are IPv4.
    private struct Keys {
        let channel: relayd_channel_key_v4
        let peer: relayd_peer_key_v4
        let clientIP: UInt32
        let serverIP: UInt32
        let relayIP: UInt32
        let peerIP: UInt32

        init?(_ route: ChannelRoute) {
            guard let client = route.client.ip.ipv4Value, let server = route.server.ip.ipv4Value,
                let relay = route.relayed.ip.ipv4Value, let peer = route.peer.ip.ipv4Value
            else { return nil }
            clientIP = client.bigEndian
            serverIP = server.bigEndian
            relayIP = relay.bigEndian
            peerIP = peer.bigEndian
            channel = relayd_channel_key_v4(
                client_ip: clientIP, server_ip: serverIP, client_port: route.client.port.bigEndian,
                server_port: route.server.port.bigEndian, channel: route.number.bigEndian, reserved: 0)
            self.peer = relayd_peer_key_v4(
                peer_ip: peerIP, relay_ip: relayIP, peer_port: route.peer.port.bigEndian,
                relay_port: route.relayed.port.bigEndian)
        }
    }
}
