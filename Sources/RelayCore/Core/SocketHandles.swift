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

/// A TCP allocation's connection to a peer (RFC 6062 §5.2, §5.3): the I/O layer's socket,
/// parked until a ConnectionBind claims it, then owned by the pipe. A typed handle like
/// `RelaySocket`; the core never reads or writes it.
public struct PeerSocket: Hashable, Sendable, CustomStringConvertible {
    public let descriptor: Int32

    @inlinable
    public init(descriptor: Int32) { self.descriptor = descriptor }

    public var description: String { "peer#\(descriptor)" }
}

/// The CONNECTION-ID of one peer connection of a TCP allocation (RFC 6062 §6.2.1): node-wide,
/// never 0, and unchanged whatever descriptor number its socket has.
public struct PeerConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt32

    @inlinable
    public init(_ value: UInt32) { self.value = value }

    public var description: String { String(value) }
}
