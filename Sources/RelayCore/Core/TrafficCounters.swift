/// Packets and bytes one allocation relayed, each way.
public struct TrafficCounters: Sendable, Hashable {
    public var packetsToPeer: UInt64 = 0
    public var bytesToPeer: UInt64 = 0
    public var packetsToClient: UInt64 = 0
    public var bytesToClient: UInt64 = 0

    public init() {}
}
