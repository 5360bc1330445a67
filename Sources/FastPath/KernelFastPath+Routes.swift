import CBPF
import CRelayFastPath
import Glibc
import RelayCore
import StunCodec

/// The descriptors of one address family's four maps: routes each way, and their counters
/// (per CPU, in maps of their own so that refreshing a route never loses a count).
struct RouteMaps {
    let channels: Int32
    let peers: Int32
    let channelCounters: Int32
    let peerCounters: Int32

    var isComplete: Bool { [channels, peers, channelCounters, peerCounters].allSatisfy { $0 >= 0 } }
}

extension KernelFastPath {
    /// Installs or refreshes both directions of `route`; false when it cannot be offloaded (its
    /// addresses are not all of one family) or the kernel refused the entry. A refresh keeps
    /// the counters.
    @discardableResult
    package func install(_ route: ChannelRoute) -> Bool {
        switch FastPathEntries(route, in: self) {
        case .ipv4(let entries): install(entries, in: ipv4Maps)
        case .ipv6(let entries): install(entries, in: ipv6Maps)
        case nil: false
        }
    }

    /// Removes both directions of `route` and returns what they relayed in the kernel.
    @discardableResult
    func remove(_ route: ChannelRoute) -> Counters {
        switch FastPathEntries(route, in: self) {
        case .ipv4(let entries): remove(entries, in: ipv4Maps)
        case .ipv6(let entries): remove(entries, in: ipv6Maps)
        case nil: Counters()
        }
    }

    /// What `route` relayed in the kernel so far.
    func counters(of route: ChannelRoute) -> Counters {
        switch FastPathEntries(route, in: self) {
        case .ipv4(let entries): counters(entries, in: ipv4Maps)
        case .ipv6(let entries): counters(entries, in: ipv6Maps)
        case nil: Counters()
        }
    }

    /// The interface a rewritten packet from `source` to `destination` (another host) leaves by:
    /// the kernel's routing decision (rtnetlink), or, if it has none, the interface that carries
    /// `source`; 0 when neither is known (the program then leaves such packets to relayd).
    func egressInterface(to destination: IPAddress, from source: IPAddress) -> UInt32 {
        if isLocal(destination) { return 0 }
        let family = destination.family == .ipv4 ? AF_INET : AF_INET6
        let to = (0..<destination.byteCount).map { destination.byte($0) }
        let from = source.family == destination.family ? (0..<source.byteCount).map { source.byte($0) } : nil
        let found = from.map { relayd_route_output_interface(family, to, $0) }
            ?? relayd_route_output_interface(family, to, nil)
        if found > 0 { return UInt32(found) }
        return egressInterfaces[source] ?? 0
    }

    /// Whether the stack delivers a packet for `ip` on this host.
    func isLocal(_ ip: IPAddress) -> Bool {
        if let v4 = ip.ipv4Value, v4 >> 24 == 127 { return true }
        if ip == .ipv6Loopback { return true }
        return localAddresses.contains(ip)
    }

    private func install<E: RouteEntries>(_ entries: E, in maps: RouteMaps) -> Bool {
        var channelKey = entries.channelKey
        var peerKey = entries.peerKey
        var channelValue = entries.channelValue
        var peerValue = entries.peerValue
        // Counters first (kept if present), so the program never relays a packet it cannot count.
        let zero = [relayd_counters](repeating: relayd_counters(), count: possibleCPUs)
        _ = zero.withUnsafeBytes { bpf_map_update_elem(maps.channelCounters, &channelKey, $0.baseAddress, UInt64(BPF_NOEXIST)) }
        _ = zero.withUnsafeBytes { bpf_map_update_elem(maps.peerCounters, &peerKey, $0.baseAddress, UInt64(BPF_NOEXIST)) }
        return bpf_map_update_elem(maps.channels, &channelKey, &channelValue, UInt64(BPF_ANY)) == 0
            && bpf_map_update_elem(maps.peers, &peerKey, &peerValue, UInt64(BPF_ANY)) == 0
    }

    private func remove<E: RouteEntries>(_ entries: E, in maps: RouteMaps) -> Counters {
        var channelKey = entries.channelKey
        var peerKey = entries.peerKey
        bpf_map_delete_elem(maps.channels, &channelKey)
        bpf_map_delete_elem(maps.peers, &peerKey)
        let result = counters(entries, in: maps)
        bpf_map_delete_elem(maps.channelCounters, &channelKey)
        bpf_map_delete_elem(maps.peerCounters, &peerKey)
        return result
    }

    private func counters<E: RouteEntries>(_ entries: E, in maps: RouteMaps) -> Counters {
        var result = Counters()
        var channelKey = entries.channelKey
        var peerKey = entries.peerKey
        var perCPU = [relayd_counters](repeating: relayd_counters(), count: possibleCPUs)
        if perCPU.withUnsafeMutableBytes({ bpf_map_lookup_elem(maps.channelCounters, &channelKey, $0.baseAddress) }) == 0 {
            for c in perCPU {
                result.packetsToPeer &+= c.packets
                result.bytesToPeer &+= c.bytes
            }
        }
        if perCPU.withUnsafeMutableBytes({ bpf_map_lookup_elem(maps.peerCounters, &peerKey, $0.baseAddress) }) == 0 {
            for c in perCPU {
                result.packetsToClient &+= c.packets
                result.bytesToClient &+= c.bytes
            }
        }
        return result
    }
}
