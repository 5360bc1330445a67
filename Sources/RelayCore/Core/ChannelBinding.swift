import StunCodec

/// A channel number bound to one peer transport address for 600 s unless refreshed (RFC 8656 §12).
public struct ChannelBinding: Sendable, Hashable {
    public var number: UInt16
    public var peer: TransportAddress
    public var expiry: Int64
}

extension Array where Element == ChannelBinding {
    /// The live channel bound to `peer` (RFC 8656 §12): the rule an allocation and the
    /// cross-thread directory both apply.
    @inlinable
    public func live(for peer: TransportAddress, now: Int64) -> ChannelBinding? {
        for c in self where c.peer == peer && c.expiry > now { return c }
        return nil
    }
}
