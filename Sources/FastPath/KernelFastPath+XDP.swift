import CRelayFastPath
import Glibc
import StunCodec

extension KernelFastPath {
    /// Attaches the XDP program to interface `name` in the driver's native mode, as a link that
    /// goes with the process. False where the driver has no native XDP (loopback, many virtual
    /// devices): the TC program alone serves that interface. The first success makes routes
    /// carry link-layer addresses from the neighbour table (`resolveLinkLayer`).
    func attachXDP(interface name: String) -> Bool {
        let ifindex = Int32(bitPattern: if_nametoindex(name))
        guard ifindex > 0 else { return false }
        let link = relayd_xdp_attach_native(ifindex, xdpProgramDescriptor)
        guard link >= 0 else { return false }
        xdpLinks.withLock { $0.append(XDPLink(ifindex: ifindex, descriptor: link)) }
        linkLayer = { destination, egress in KernelFastPath.resolveLinkLayer(destination, egress: egress) }
        return true
    }

    /// The next hop's link-layer address towards `destination` (the route's gateway, or the
    /// destination itself on the link) from the neighbour table, and interface `egress`'s own.
    /// Nil when either is unknown (not resolved yet, not Ethernet).
    static func resolveLinkLayer(_ destination: IPAddress, egress: UInt32) -> LinkLayer? {
        guard egress != 0 else { return nil }
        let family = destination.family == .ipv4 ? AF_INET : AF_INET6
        let address = (0..<destination.byteCount).map { destination.byte($0) }
        var ifindex: Int32 = 0
        var gateway = [UInt8](repeating: 0, count: 16)
        var hasGateway: Int32 = 0
        guard relayd_route_next_hop(family, address, nil, &ifindex, &gateway, &hasGateway) == 0 else { return nil }
        let nextHop = hasGateway != 0 ? Array(gateway[0..<destination.byteCount]) : address
        var neighbour = [UInt8](repeating: 0, count: 6)
        var own = [UInt8](repeating: 0, count: 6)
        guard relayd_neighbour_address(family, Int32(egress), nextHop, &neighbour) == 0,
            relayd_interface_address(Int32(egress), &own) == 0
        else { return nil }
        return LinkLayer(nextHop: neighbour, egress: own)
    }
}
