import StunCodec

/// Permission for a peer IP address (port ignored) to exchange data with an allocation,
/// valid 300 s unless refreshed (RFC 8656 §9).
public struct Permission: Sendable, Hashable {
    public var peer: IPAddress
    /// Monotonic second at which it expires.
    public var expiry: Int64
}
