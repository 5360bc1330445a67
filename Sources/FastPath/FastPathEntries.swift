import CRelayFastPath
import RelayCore
import StunCodec

/// A route's two map entries (client -> peer by channel, peer -> client by 5-tuple) in the
/// layout of `relayd_fastpath.h`: addresses, ports and the channel number in network byte order.
protocol RouteEntries {
    associatedtype ChannelKey: BitwiseCopyable
    associatedtype ChannelValue: BitwiseCopyable
    associatedtype PeerKey: BitwiseCopyable
    associatedtype PeerValue: BitwiseCopyable
    var channelKey: ChannelKey { get }
    var channelValue: ChannelValue { get }
    var peerKey: PeerKey { get }
    var peerValue: PeerValue { get }
}

struct IPv4RouteEntries: RouteEntries {
    var channelKey: relayd_channel_key_v4
    var channelValue: relayd_channel_value_v4
    var peerKey: relayd_peer_key_v4
    var peerValue: relayd_peer_value_v4
}

struct IPv6RouteEntries: RouteEntries {
    var channelKey: relayd_channel_key_v6
    var channelValue: relayd_channel_value_v6
    var peerKey: relayd_peer_key_v6
    var peerValue: relayd_peer_value_v6
}

/// The entries of a route whose four addresses are of one family; nil for a route that changes
/// family (an IPv4 client with an IPv6 relayed address, RFC 6156), which stays in user space.
enum FastPathEntries {
    case ipv4(IPv4RouteEntries)
    case ipv6(IPv6RouteEntries)

    /// Whether the XDP program could not be given a direction's link-layer addresses (a
    /// destination on another host whose next hop the neighbour table does not know yet).
    static func linkLayerMissing(_ route: ChannelRoute, in fastPath: KernelFastPath) -> Bool {
        guard fastPath.xdpAttached, route.client.ip.family == route.peer.ip.family else { return false }
        let peerSide = !fastPath.isLocal(route.peer.ip)
            && fastPath.linkLayer(route.peer.ip, fastPath.egressInterface(to: route.peer.ip, from: route.relayed.ip)) == nil
        let clientSide = !fastPath.isLocal(route.client.ip)
            && fastPath.linkLayer(route.client.ip, fastPath.egressInterface(to: route.client.ip, from: route.server.ip)) == nil
        return peerSide || clientSide
    }

    init?(_ route: ChannelRoute, in fastPath: KernelFastPath) {
        let expiry = UInt64(max(route.expiry, 0))
        let relayedPeer = route.peerIsRelayed ? UInt32(RELAYD_ROUTE_RELAYED_PEER) : 0
        let toPeerFlags: UInt32 = (fastPath.isLocal(route.peer.ip) ? UInt32(RELAYD_ROUTE_LOCAL) : 0) | relayedPeer
        let toClientFlags: UInt16 =
            (fastPath.isLocal(route.client.ip) ? UInt16(RELAYD_ROUTE_LOCAL) : 0) | UInt16(relayedPeer)
        let relayEgress = fastPath.egressInterface(to: route.peer.ip, from: route.relayed.ip)
        let serverEgress = fastPath.egressInterface(to: route.client.ip, from: route.server.ip)
        // The XDP program's link-layer addresses (zero: unknown, the TC program sends the packet).
        let toPeerL2 = LinkLayerPair(
            relayEgress == 0 || fastPath.isLocal(route.peer.ip) ? nil : fastPath.linkLayer(route.peer.ip, relayEgress))
        let toClientL2 = LinkLayerPair(
            serverEgress == 0 || fastPath.isLocal(route.client.ip) ? nil : fastPath.linkLayer(route.client.ip, serverEgress))
        let client = route.client.port.bigEndian
        let server = route.server.port.bigEndian
        let relay = route.relayed.port.bigEndian
        let peer = route.peer.port.bigEndian
        let channel = route.number.bigEndian
        if let clientIP = route.client.ip.ipv4Value, let serverIP = route.server.ip.ipv4Value,
            let relayIP = route.relayed.ip.ipv4Value, let peerIP = route.peer.ip.ipv4Value
        {
            self = .ipv4(
                IPv4RouteEntries(
                    channelKey: relayd_channel_key_v4(
                        client_ip: clientIP.bigEndian, server_ip: serverIP.bigEndian, client_port: client,
                        server_port: server, channel: channel, reserved: 0),
                    channelValue: relayd_channel_value_v4(
                        relay_ip: relayIP.bigEndian, peer_ip: peerIP.bigEndian, relay_port: relay, peer_port: peer,
                        flags: toPeerFlags, egress_ifindex: relayEgress, reserved: 0, expiry: expiry,
                        next_hop: toPeerL2.nextHop, egress_address: toPeerL2.egress, reserved_l2: 0),
                    peerKey: relayd_peer_key_v4(
                        peer_ip: peerIP.bigEndian, relay_ip: relayIP.bigEndian, peer_port: peer, relay_port: relay),
                    peerValue: relayd_peer_value_v4(
                        server_ip: serverIP.bigEndian, client_ip: clientIP.bigEndian, server_port: server,
                        client_port: client, channel: channel, flags: toClientFlags, egress_ifindex: serverEgress,
                        reserved: 0, expiry: expiry, next_hop: toClientL2.nextHop, egress_address: toClientL2.egress,
                        reserved_l2: 0)))
            return
        }
        let addresses = [route.client.ip, route.server.ip, route.relayed.ip, route.peer.ip]
        guard addresses.allSatisfy({ $0.family == .ipv6 }) else { return nil }
        let (clientIP, serverIP, relayIP, peerIP) = (
            Self.words(route.client.ip), Self.words(route.server.ip), Self.words(route.relayed.ip),
            Self.words(route.peer.ip)
        )
        self = .ipv6(
            IPv6RouteEntries(
                channelKey: relayd_channel_key_v6(
                    client_ip: clientIP, server_ip: serverIP, client_port: client, server_port: server,
                    channel: channel, reserved: 0),
                channelValue: relayd_channel_value_v6(
                    relay_ip: relayIP, peer_ip: peerIP, relay_port: relay, peer_port: peer, flags: toPeerFlags,
                    egress_ifindex: relayEgress, reserved: 0, expiry: expiry, next_hop: toPeerL2.nextHop,
                    egress_address: toPeerL2.egress, reserved_l2: 0),
                peerKey: relayd_peer_key_v6(peer_ip: peerIP, relay_ip: relayIP, peer_port: peer, relay_port: relay),
                peerValue: relayd_peer_value_v6(
                    server_ip: serverIP, client_ip: clientIP, server_port: server, client_port: client,
                    channel: channel, flags: toClientFlags, egress_ifindex: serverEgress, reserved: 0,
                    expiry: expiry, next_hop: toClientL2.nextHop, egress_address: toClientL2.egress, reserved_l2: 0)))
    }

    /// An IPv6 address as the four 32-bit words of `relayd_fastpath.h`, in network byte order.
    static func words(_ ip: IPAddress) -> (UInt32, UInt32, UInt32, UInt32) {
        (
            UInt32(truncatingIfNeeded: ip.high >> 32).bigEndian, UInt32(truncatingIfNeeded: ip.high).bigEndian,
            UInt32(truncatingIfNeeded: ip.low >> 32).bigEndian, UInt32(truncatingIfNeeded: ip.low).bigEndian
        )
    }
}

/// A route's next hop and egress interface link-layer addresses in the C layout (six bytes each).
struct LinkLayerPair {
    typealias Address = (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)
    var nextHop: Address = (0, 0, 0, 0, 0, 0)
    var egress: Address = (0, 0, 0, 0, 0, 0)

    init(_ addresses: KernelFastPath.LinkLayer?) {
        guard let addresses, addresses.nextHop.count == 6, addresses.egress.count == 6 else { return }
        let n = addresses.nextHop
        let e = addresses.egress
        nextHop = (n[0], n[1], n[2], n[3], n[4], n[5])
        egress = (e[0], e[1], e[2], e[3], e[4], e[5])
    }
}
