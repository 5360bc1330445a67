/// Packets and bytes relayed each way: one allocation's, or what a data plane outside the core
/// (the kernel fast path) relayed for it.
public struct TrafficCounters: Sendable, Hashable {
    public var packetsToPeer: UInt64 = 0
    public var bytesToPeer: UInt64 = 0
    public var packetsToClient: UInt64 = 0
    public var bytesToClient: UInt64 = 0

    public init(packetsToPeer: UInt64 = 0, bytesToPeer: UInt64 = 0, packetsToClient: UInt64 = 0, bytesToClient: UInt64 = 0) {
        self.packetsToPeer = packetsToPeer
        self.bytesToPeer = bytesToPeer
        self.packetsToClient = packetsToClient
        self.bytesToClient = bytesToClient
    }

    public static func + (a: Self, b: Self) -> Self {
        Self(
            packetsToPeer: a.packetsToPeer &+ b.packetsToPeer, bytesToPeer: a.bytesToPeer &+ b.bytesToPeer,
            packetsToClient: a.packetsToClient &+ b.packetsToClient, bytesToClient: a.bytesToClient &+ b.bytesToClient)
    }

    public static func - (a: Self, b: Self) -> Self {
        Self(
            packetsToPeer: a.packetsToPeer &- b.packetsToPeer, bytesToPeer: a.bytesToPeer &- b.bytesToPeer,
            packetsToClient: a.packetsToClient &- b.packetsToClient, bytesToClient: a.bytesToClient &- b.bytesToClient)
    }

    public static func += (a: inout Self, b: Self) { a = a + b }
}
