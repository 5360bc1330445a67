import StunCodec

/// What happened to one allocation's session, as a value: emitted by the core in order with
/// its other commands, and handed by the loop to every `SessionObserver` (docs/architecture.md,
/// "Session events"). The log, the metrics and, later, accounting read sessions from these
/// alone, so no feature needs a hook of its own in the protocol code.
public enum SessionEvent: Sendable {
    case started(SessionStart)
    /// A Refresh with a nonzero lifetime (RFC 8656 §7.3).
    case refreshed(SessionRefresh)
    /// The client moved to a new 5-tuple with its mobility ticket (RFC 8016 §3.3).
    case moved(SessionMove)
    case ended(SessionSummary)
}

/// A new allocation (RFC 8656 §7.2), logged as one `allocation_created` line.
public struct SessionStart: Sendable {
    public let session: String
    public let fiveTuple: FiveTuple
    /// The socket the client's requests arrive on: its TCP/TLS connection or DTLS session, or
    /// the UDP listener.
    public let clientSocket: ClientSocket
    /// The relayed address as the client was told it (advertised form), and as bound.
    public let relayed: TransportAddress
    public let bound: TransportAddress
    /// A dual allocation's second relayed address (advertised form); nil otherwise.
    public var additionalRelayed: TransportAddress? = nil
    /// The user id (the part after the REST separator, or the whole USERNAME), as received.
    public let user: String
    /// How the client authenticated (RFC 8489 §9.2).
    public let credentials: CredentialAlgorithms
    public let lifetimeSeconds: Int64
    /// Adopted with its sockets open (restored from the state journal, or handed over), not
    /// made by an Allocate.
    public var adopted = false
    /// Its tenant's name (docs/tenants.md); empty for the default tenant.
    public var tenant = ""
}

/// Why an allocation ended and what it carried (RFC 8656 §7.3, §8), logged as one
/// `allocation_deleted` line.
public struct SessionSummary: Sendable {
    public let session: String
    public let fiveTuple: FiveTuple
    /// The allocation's relay socket (what a data plane outside the core counted it under).
    public let relaySocket: RelaySocket
    /// The relayed address as the client was told it (advertised form).
    public let relayed: TransportAddress
    /// A dual allocation's second relay socket and relayed address, when it had one at the end.
    public var additionalRelaySocket: RelaySocket? = nil
    public var additionalRelayed: TransportAddress? = nil
    /// The user id (the part after the REST separator, or the whole USERNAME), as received.
    public let user: String
    public let reason: AllocationEnd
    /// How the client authenticated (RFC 8489 §9.2).
    public let credentials: CredentialAlgorithms
    public let durationSeconds: Int64
    public let traffic: TrafficCounters
    public let permissionsUsed: Int
    public let channelsUsed: Int
    /// What a data plane outside the core relayed for it (the kernel fast path), which the I/O
    /// layer adds before observers see the summary; nil when none did.
    public var relayedOutside: TrafficCounters? = nil
    /// Its tenant's name (docs/tenants.md); empty for the default tenant.
    public var tenant = ""
    /// Adopted by this process (a live upgrade or a restore): `durationSeconds` runs from the
    /// adoption, and `carried` is what `traffic` holds from before it (docs/usage.md).
    public var adopted = false
    public var carried = TrafficCounters()
}

/// A Refresh that extended an allocation (RFC 8656 §7.3).
public struct SessionRefresh: Sendable {
    public let session: String
    public let fiveTuple: FiveTuple
    /// The lifetime granted from now.
    public let lifetimeSeconds: Int64
}

/// A mobile allocation's client moved (RFC 8016 §3.3), logged as one `allocation_moved` line.
public struct SessionMove: Sendable {
    public let session: String
    public let from: FiveTuple
    public let to: FiveTuple
}
