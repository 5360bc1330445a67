import StunCodec

/// The one question the core asks the I/O layer and waits for: can a relay socket be bound to
/// this address? The Allocate answer depends on it (another port is tried, or 508, RFC 8656
/// §7.2), so it is a synchronous call; every other effect, closing the socket included, is a
/// `CoreCommand` (docs/architecture.md).
public protocol RelaySocketProvider: AnyObject {
    /// Opens and registers a UDP socket bound to `address`; nil if the port cannot be bound (the
    /// core then tries another).
    func openRelaySocket(bound address: TransportAddress) -> RelaySocket?
    /// Opens and registers a TCP socket listening on `address`, the relayed address of a TCP
    /// allocation (RFC 6062 §5.1); nil if the port cannot be bound.
    func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocket?
}

extension RelaySocketProvider {
    /// Without TCP relaying in this provider, a TCP Allocate finds no port (508).
    public func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocket? { nil }
}
