import StunCodec

/// Permission for a peer IP address (port ignored) to exchange data with an allocation,
/// valid 300 s unless refreshed (RFC 8656 §9).
public struct Permission: Sendable, Hashable {
    public var peer: IPAddress
    /// Monotonic second at which it expires.
    public var expiry: Int64
}

extension Array where Element == Permission {
    /// True when the list holds a live permission for `peer` (one entry per IP, RFC 8656 §9):
    /// the rule an allocation and the cross-thread directory both apply.
    @inlinable
    public func allows(_ peer: IPAddress, now: Int64) -> Bool {
        for p in self where p.peer == peer { return p.expiry > now }
        return false
    }

    /// The form in which the holder of these permissions knows one of relayd's own relayed
    /// addresses behind `external-ip`: the advertised one XOR-RELAYED-ADDRESS gave out, unless
    /// only the bound one is permitted (its client addressed the peer that way). The same rule
    /// on the socket path, the same-loop short-circuit and across loops (docs/external-ip.md).
    @inlinable
    public func knownForm(advertised: TransportAddress, bound: TransportAddress, now: Int64) -> TransportAddress {
        if advertised != bound && !allows(advertised.ip, now: now) && allows(bound.ip, now: now) { return bound }
        return advertised
    }
}
