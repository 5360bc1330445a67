import StunCodec

/// What opening a relay socket came to.
public enum RelaySocketOpening: Sendable, Equatable {
    case opened(RelaySocket)
    /// The port is bound already (another process holds it): the core tries another port.
    case portInUse
    /// The process or the system is out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
    /// ENOMEM): no other port would do better, so the Allocate is refused at once (508).
    case exhausted
}

/// The one question the core asks the I/O layer and waits for: can a relay socket be bound to
/// this address? The Allocate answer depends on it (another port is tried, or 508, RFC 8656
/// §7.2), so it is a synchronous call; every other effect, closing the socket included, is a
/// `CoreCommand` (docs/architecture.md).
public protocol RelaySocketProvider: AnyObject {
    /// Opens and registers a UDP socket bound to `address`.
    func openRelaySocket(bound address: TransportAddress) -> RelaySocketOpening
    /// Opens and registers a TCP socket listening on `address`, the relayed address of a TCP
    /// allocation (RFC 6062 §5.1).
    func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocketOpening
}

extension RelaySocketProvider {
    /// Without TCP relaying in this provider, a TCP Allocate finds no port (508).
    public func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocketOpening { .portInUse }
}
