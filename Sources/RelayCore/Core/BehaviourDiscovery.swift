import StunCodec

/// Where a Binding response of NAT behaviour discovery leaves from (RFC 5780 §6.1, Table 1):
/// the request came in on Da:Dp; Ca is the other listening IP of its family and scope (loopback
/// pairs only with loopback: an internet client must never be told 127.0.0.1), Cp the other
/// listening port. Built from this loop's UDP listeners, so each address is a socket the loop
/// can send from; wildcard listeners take no part (docs/nat-discovery.md).
struct BehaviourDiscovery {
    /// Ca:Cp, the OTHER-ADDRESS.
    let other: TransportAddress
    private let listeners: [(address: TransportAddress, socket: ClientSocket)]
    private let received: TransportAddress

    /// nil when the loop lacks an alternate IP of `received`'s family or a second port.
    init?(received: TransportAddress, listeners: [(address: TransportAddress, socket: ClientSocket)]) {
        guard !Self.isWildcard(received.ip) else { return nil }
        let sameFamily = listeners.map(\.address).filter {
            $0.ip.family == received.ip.family && !Self.isWildcard($0.ip)
                && Self.isLoopback($0.ip) == Self.isLoopback(received.ip)
        }
        var ips: [IPAddress] = []
        var ports: [UInt16] = []
        for address in sameFamily {
            if !ips.contains(address.ip) { ips.append(address.ip) }
            if !ports.contains(address.port) { ports.append(address.port) }
        }
        guard ips.count >= 2, ports.count >= 2, ips.contains(received.ip), ports.contains(received.port),
            let otherIP = ips.first(where: { $0 != received.ip }),
            let otherPort = ports.first(where: { $0 != received.port })
        else { return nil }
        let other = TransportAddress(ip: otherIP, port: otherPort)
        // Every combination must be a listener of this loop, or the flags cannot all be honoured.
        for ip in [received.ip, otherIP] {
            for port in [received.port, otherPort]
            where !listeners.contains(where: { $0.address == TransportAddress(ip: ip, port: port) }) {
                return nil
            }
        }
        self.other = other
        self.listeners = listeners
        self.received = received
    }

    /// The address and socket the response leaves from for these flags (RFC 5780 Table 1).
    func source(changeIP: Bool, changePort: Bool) -> (address: TransportAddress, socket: ClientSocket) {
        let address = TransportAddress(
            ip: changeIP ? other.ip : received.ip, port: changePort ? other.port : received.port)
        return listeners.first { $0.address == address }!
    }

    static func isWildcard(_ ip: IPAddress) -> Bool { ip == .ipv4Any || ip == .ipv6Any }

    static func isLoopback(_ ip: IPAddress) -> Bool {
        if let v4 = ip.ipv4Value { return v4 >> 24 == 127 }
        return ip == .ipv6Loopback
    }
}
