import StunCodec

/// Where a Binding response of NAT behaviour discovery leaves from (RFC 5780 §6.1, Table 1):
/// the request came in on Da:Dp; Ca is the other listening IP of its family and scope (loopback
/// pairs only with loopback: an internet client must never be told 127.0.0.1), Cp the other
/// listening port. Built from this loop's UDP listeners, so each address is a socket the loop
/// can send from; wildcard listeners take no part (docs/nat-discovery.md). The core builds one
/// per listener as the listeners are added, not per request.
public struct BehaviourDiscovery: Sendable {
    /// Ca:Cp, the OTHER-ADDRESS.
    public let other: TransportAddress
    /// The four sources of Table 1, indexed by `index(changeIP:changePort:)`.
    private let sources: [(address: TransportAddress, socket: ClientSocket)]

    /// nil when the loop lacks an alternate IP of `received`'s family and scope, or a second port.
    public init?(received: TransportAddress, listeners: [(address: TransportAddress, socket: ClientSocket)]) {
        guard !received.ip.isWildcard else { return nil }
        let sameFamily = listeners.map(\.address).filter {
            $0.ip.family == received.ip.family && !$0.ip.isWildcard && $0.ip.isLoopback == received.ip.isLoopback
        }
        var ips: [IPAddress] = []
        var ports: [UInt16] = []
        for address in sameFamily {
            if !ips.contains(address.ip) { ips.append(address.ip) }
            if !ports.contains(address.port) { ports.append(address.port) }
        }
        guard ips.contains(received.ip), ports.contains(received.port),
            let otherIP = ips.first(where: { $0 != received.ip }),
            let otherPort = ports.first(where: { $0 != received.port })
        else { return nil }
        // Every combination must be a listener of this loop, or the flags cannot all be honoured.
        var sources: [(address: TransportAddress, socket: ClientSocket)] = []
        for ip in [received.ip, otherIP] {
            for port in [received.port, otherPort] {
                guard let listener = listeners.first(where: { $0.address == TransportAddress(ip: ip, port: port) })
                else { return nil }
                sources.append(listener)
            }
        }
        self.other = TransportAddress(ip: otherIP, port: otherPort)
        self.sources = sources
    }

    /// The address and socket the response leaves from for these flags (RFC 5780 Table 1).
    func source(changeIP: Bool, changePort: Bool) -> (address: TransportAddress, socket: ClientSocket) {
        sources[(changeIP ? 2 : 0) + (changePort ? 1 : 0)]
    }
}
