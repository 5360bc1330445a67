import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The relay-to-relay short-circuit across loop threads: a packet for the relayed
/// address of a UDP allocation on another loop is framed by the sending loop from the shared
/// directory and leaves through its own listener, as if it had crossed both relay sockets; one
/// for a TCP/TLS allocation is framed for the stream and queued on the client's connection.
/// Send → Data indication and the missing-permission drop run on one and two loops in
/// `CoreShortCircuitTests`.
@Suite struct CoreCrossLoopTests {
    /// Two loops sharing a directory and a quota; A allocates on loop 0, B on loop 1.
    private func pair(
        _ options: CoreFixture.Options = CoreFixture.options(), transportB: TransportProtocol = .udp
    ) throws -> (loop0: CoreHarness, loop1: CoreHarness, a: TurnTestClient, b: TurnTestClient,
        relayedA: TransportAddress, relayedB: TransportAddress)
    {
        let pair = try RelayPair(loops: 2, options, transportB: transportB)
        return (pair.sender, pair.receiver, pair.a, pair.b, pair.relayedA, pair.relayedB)
    }

    private func socket(of packet: SentPacket) -> ClientSocket? {
        if case .client(let origin) = packet.route { return origin.socket }
        return nil
    }

    @Test("ChannelData from A (loop 0) to B's relayed address (loop 1) leaves loop 0's listener as B's ChannelData")
    func channelToChannel() throws {
        let (loop0, loop1, a, b, relayedA, relayedB) = try pair()
        #expect(try a.channelBind(0x4001, to: relayedB).isSuccess)
        #expect(try b.channelBind(0x4002, to: relayedA).isSuccess)
        let payload: [UInt8] = Array(0..<100)
        let sent = loop0.receive(StunTestMessages.channelData(0x4001, payload), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        #expect(socket(of: sent[0]) == loop0.listenerSocket)
        #expect(sent[0].bytes == StunTestMessages.channelData(0x4002, payload))
        #expect(loop0.counters.shortCircuited == 1)
        #expect(loop0.counters.packetsToPeer == 1 && loop0.counters.packetsToClient == 1)
        #expect(loop1.counters.packetsToClient == 0)

        // B's deletion summary counts what loop 0 delivered for it.
        let allocationB = try #require(loop1.allocation(of: CoreFixture.clientB))
        #expect(try b.refresh(lifetime: 0).isSuccess)
        #expect(allocationB.traffic.packetsToClient == 1 && allocationB.traffic.bytesToClient == 100)
        #expect(loop0.core.tables.directory.count == 1)
        // Gone from the directory and the port pool: A's channel to it carries nothing more.
        let after = loop0.receive(StunTestMessages.channelData(0x4001, payload), from: CoreFixture.clientA)
        #expect(after.isEmpty)
        #expect(loop0.counters.dropped(.policy) == 1)
    }

    @Test("A sweep that expires nothing leaves the permissions and channels the directory shares uncopied")
    func sweepKeepsSharedArrays() throws {
        let (_, loop1, _, b, relayedA, _) = try pair()
        #expect(try b.channelBind(0x4002, to: relayedA).isSuccess)
        let allocationB = try #require(loop1.allocation(of: CoreFixture.clientB))
        let permissions = allocationB.permissions.withUnsafeBufferPointer { $0.baseAddress }
        let channels = allocationB.channels.withUnsafeBufferPointer { $0.baseAddress }
        #expect(permissions != nil && channels != nil)
        loop1.advance(by: 1)
        loop1.sweep()
        #expect(allocationB.permissions.withUnsafeBufferPointer { $0.baseAddress } == permissions)
        #expect(allocationB.channels.withUnsafeBufferPointer { $0.baseAddress } == channels)
        // Past the permission's lifetime (RFC 8656 §9) the sweep does remove it.
        loop1.advance(by: 300)
        loop1.sweep()
        #expect(allocationB.permissions.isEmpty)
    }

    @Test("B's permission expiring on loop 1 stops loop 0's deliveries (RFC 8656 §9 lifetime)")
    func permissionExpiry() throws {
        let (loop0, loop1, a, b, relayedA, relayedB) = try pair()
        #expect(try b.createPermission([relayedA]).isSuccess)
        loop0.advance(by: 250)
        loop1.advance(by: 250)
        #expect(try a.createPermission([relayedB]).isSuccess)
        #expect(try b.refresh(lifetime: 600).isSuccess)
        let early = loop0.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [1]), from: CoreFixture.clientA)
        #expect(early.count == 1 && early[0].client == CoreFixture.clientB)
        loop0.advance(by: 60)
        let late = loop0.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [2]), from: CoreFixture.clientA)
        #expect(late.isEmpty)
        #expect(loop0.counters.dropped(.noPermission) == 1)
    }

    @Test("Behind 1:1 NAT: a packet for B's external-ip form on loop 1 reaches B from A's external-ip form")
    func externalForm() throws {
        let config = CoreFixture.options {
            $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: .literal("203.0.113.7"))]
        }
        let (loop0, _, a, b, relayedA, relayedB) = try pair(config)
        #expect(relayedB.ip == .literal("203.0.113.7"))
        #expect(try a.channelBind(0x4001, to: relayedB).isSuccess)
        #expect(try b.createPermission([relayedA]).isSuccess)
        let sent = loop0.receive(StunTestMessages.channelData(0x4001, [42, 43]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        let data = try ReceivedStun(sent[0].bytes)
        #expect(data.decode(XORPeerAddress.self)?.address == relayedA)
        #expect(data.decode(DataAttribute.self)?.bytes == [42, 43])
        #expect(loop0.counters.shortCircuited == 1)
    }

    @Test("Without a stream transport a TCP client's allocation is not listed: the socket path is used")
    func streamTargetWithoutInbox() throws {
        let (loop0, _, a, b, relayedA, relayedB) = try pair(transportB: .tcp)
        #expect(try a.createPermission([relayedB]).isSuccess)
        #expect(try b.createPermission([relayedA]).isSuccess)
        let sent = loop0.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [7]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].peer?.peer == relayedB)
        #expect(loop0.counters.shortCircuited == 0)
        #expect(loop0.core.tables.directory.count == 1)
    }

    @Test("A TLS client's allocation on loop 1 gets loop 0's packets on its connection, framed as loop 1 would")
    func streamTargetFromOtherLoop() throws {
        let sink = RecordingStreamSink()
        let pair = try RelayPair(loops: 2, transportB: .tls, streamSink: sink)
        let (loop0, loop1, a, b) = (pair.sender, pair.receiver, pair.a, pair.b)
        #expect(try a.channelBind(0x4001, to: pair.relayedB).isSuccess)
        #expect(try b.createPermission([pair.relayedA]).isSuccess)
        let payload: [UInt8] = Array(1...8)
        // Nothing leaves through a socket: no relay-socket send, no UDP client packet.
        #expect(loop0.receive(StunTestMessages.channelData(0x4001, payload), from: CoreFixture.clientA).isEmpty)
        #expect(loop0.counters.shortCircuited == 1 && loop0.counters.packetsToClient == 1)
        #expect(loop1.drainOutbox().isEmpty)
        try #require(sink.packets.count == 1)
        let data = try ReceivedStun(sink.packets[0])
        #expect(data.decode(XORPeerAddress.self)?.address == pair.relayedA)
        #expect(data.decode(DataAttribute.self)?.bytes == payload)

        // With a channel to A, ChannelData (RFC 8656 §12.7), padded for the stream (§12.5).
        #expect(try b.channelBind(0x4002, to: pair.relayedA).isSuccess)
        _ = loop0.receive(StunTestMessages.channelData(0x4001, [9, 9, 9]), from: CoreFixture.clientA)
        try #require(sink.packets.count == 2)
        #expect(sink.packets[1] == [0x40, 0x02, 0x00, 0x03, 9, 9, 9, 0])
    }

    @Test("A packet for a stream client on another loop is checked against its permissions: a counted drop")
    func streamTargetChecksPermission() throws {
        let sink = RecordingStreamSink()
        let pair = try RelayPair(loops: 2, transportB: .tcp, streamSink: sink)
        #expect(try pair.a.createPermission([pair.relayedB]).isSuccess)
        // A permission for another peer lists B (`RelayedAddressDirectory.publish`).
        #expect(try pair.b.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(
            pair.sender.receive(
                try StunTestMessages.sendIndication(to: pair.relayedB, payload: [5]), from: CoreFixture.clientA
            ).isEmpty)
        #expect(sink.packets.isEmpty)
        #expect(pair.sender.counters.dropped(.noPermission) == 1)

        // Once B's allocation is gone, its relayed address is no peer at all: dropped by the policy.
        #expect(try pair.b.refresh(lifetime: 0).isSuccess)
        let after = pair.sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [6]), from: CoreFixture.clientA)
        #expect(after.isEmpty)
        #expect(pair.sender.counters.dropped(.policy) == 1)
        #expect(sink.packets.isEmpty)
    }

    @Test("A stream connection that refuses the packet (closing, or over its output bound) is a counted drop")
    func streamTargetRefuses() throws {
        let sink = RecordingStreamSink()
        let pair = try RelayPair(loops: 2, transportB: .tcp, streamSink: sink)
        #expect(try pair.a.createPermission([pair.relayedB]).isSuccess)
        #expect(try pair.b.createPermission([pair.relayedA]).isSuccess)
        sink.refuse()
        #expect(
            pair.sender.receive(
                try StunTestMessages.sendIndication(to: pair.relayedB, payload: [5]), from: CoreFixture.clientA
            ).isEmpty)
        #expect(pair.sender.counters.dropped(.noAllocation) == 1)
        #expect(pair.sender.counters.shortCircuited == 0)

        // Only packets the connection took count towards B's totals (added when B is deleted).
        sink.accept()
        _ = pair.sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [6, 7, 8]), from: CoreFixture.clientA)
        #expect(sink.packets.count == 1)
        let delivered = try #require(pair.receiver.core.tables.directory.delivered(to: pair.relayedB))
        #expect(delivered.packets == 1 && delivered.bytes == 3)
    }

    @Test("With one loop nothing is published to the directory")
    func singleLoopPublishesNothing() throws {
        let harness = CoreHarness()
        let a = harness.restClient(at: CoreFixture.clientA, user: "a")
        _ = try #require(try a.allocate().xorRelayedAddress)
        #expect(try a.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA) != nil)
        #expect(harness.core.tables.directory.count == 0)
    }
}
