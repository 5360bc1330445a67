import StunCodec

/// A relay socket the core asks the I/O layer to open (the `openRelaySocket` command): a UDP
/// socket bound to `address`, or for a TCP allocation a TCP socket listening on it (RFC 6062
/// §5.1). The I/O layer answers with `RelayCore.relaySocketOpened(_:_:now:)`, carrying this value
/// back; until then the Allocate waits (docs/architecture.md, "Relay sockets").
public struct RelaySocketOpen: Sendable, Hashable, CustomStringConvertible {
    /// Names this open among those the core is waiting for.
    public let id: UInt64
    public let address: TransportAddress
    public let tcp: Bool

    public init(id: UInt64, address: TransportAddress, tcp: Bool) {
        self.id = id
        self.address = address
        self.tcp = tcp
    }

    public var description: String { "open#\(id) \(tcp ? "tcp" : "udp") \(address)" }
}

/// What opening a relay socket came to: the input that answers an `openRelaySocket` command.
public enum RelaySocketOpening: Sendable, Equatable {
    case opened(RelaySocket)
    /// The port is bound already (EADDRINUSE: another socket holds it): the core tries another
    /// port and leaves this one out of the search for a while (`RelayPortPool.foreignPortSeconds`).
    case portInUse
    /// Another failure of this port (EADDRNOTAVAIL, EACCES, …): the port goes back to the pool
    /// and the core tries another.
    case failed
    /// The process or the system is out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
    /// ENOMEM): no other port would do better, so the Allocate is refused at once (508).
    case exhausted
}
