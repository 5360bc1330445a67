/// A UDP socket the I/O layer opened for an allocation's relayed transport address (RFC 8656
/// §7.2). A typed handle: the core cannot hand a relay socket where a client's socket is meant,
/// and never reads or writes through one; `descriptor` is for the I/O layer.
public struct RelaySocket: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let descriptor: Int32

    @inlinable
    public init(descriptor: Int32) { self.descriptor = descriptor }

    public static func < (a: RelaySocket, b: RelaySocket) -> Bool { a.descriptor < b.descriptor }
    public var description: String { "relay#\(descriptor)" }
}

/// The socket a client's packets arrive on and its answers leave from: the UDP listener, or the
/// TCP/TLS connection. A typed handle like `RelaySocket`.
public struct ClientSocket: Hashable, Sendable, CustomStringConvertible {
    public let descriptor: Int32

    @inlinable
    public init(descriptor: Int32) { self.descriptor = descriptor }

    public var description: String { "client#\(descriptor)" }
}
