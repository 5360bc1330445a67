import StunCodec

/// A channel number bound to one peer transport address for 600 s unless refreshed (RFC 8656 §12).
public struct ChannelBinding: Sendable, Hashable {
    public var number: UInt16
    public var peer: TransportAddress
    public var expiry: Int64
}
