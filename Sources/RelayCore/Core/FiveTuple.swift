import StunCodec

/// Client address, server address and transport: what identifies an allocation (RFC 8656 §2).
public struct FiveTuple: Hashable, Sendable {
    public var client: TransportAddress
    public var server: TransportAddress
    public var transport: TransportProtocol

    @inlinable
    public init(client: TransportAddress, server: TransportAddress, transport: TransportProtocol) {
        self.client = client
        self.server = server
        self.transport = transport
    }
}

extension FiveTuple: CustomStringConvertible {
    public var description: String { "\(transport.label) \(client)->\(server)" }
}

/// Where a client's packet came from: its 5-tuple plus the socket it arrived on
/// (the UDP listener, or the TCP/TLS connection), which is where answers go back out.
public struct ClientOrigin: Hashable, Sendable {
    public var fiveTuple: FiveTuple
    /// The listener (UDP) or connection (TCP/TLS).
    public var socket: ClientSocket
    /// The tenant the TLS server name named (SNI, RFC 6066 §3; docs/tenants.md), as its index;
    /// 0 when the connection named none, or is not TLS. Not part of the origin's identity: an
    /// answer built from the 5-tuple and socket alone goes to the same connection.
    public var serverNameTenant: UInt16

    @inlinable
    public init(fiveTuple: FiveTuple, socket: ClientSocket, serverNameTenant: UInt16 = 0) {
        self.fiveTuple = fiveTuple
        self.socket = socket
        self.serverNameTenant = serverNameTenant
    }

    @inlinable
    public static func == (a: ClientOrigin, b: ClientOrigin) -> Bool {
        a.fiveTuple == b.fiveTuple && a.socket == b.socket
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fiveTuple)
        hasher.combine(socket)
    }
}
