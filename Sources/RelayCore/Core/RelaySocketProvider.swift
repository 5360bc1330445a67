import StunCodec

/// The I/O layer's side of relay sockets: the core decides which address and port to use and
/// when to close; the provider owns the descriptor and its event registration.
public protocol RelaySocketProvider: AnyObject {
    /// Opens and registers a UDP socket bound to `address`; returns its descriptor, or nil if
    /// the port cannot be bound (the core then tries another).
    func openRelaySocket(bound address: TransportAddress) -> Int32?
    /// Unregisters and closes a relay socket.
    func closeRelaySocket(_ socket: Int32)
}
