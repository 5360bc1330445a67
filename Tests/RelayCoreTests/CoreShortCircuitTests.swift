import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import RelayCore

/// The relay-to-relay short-circuit: traffic between two allocations of one core goes
/// straight to the other allocation's client, framed as if it had crossed the relay sockets.
@Suite struct CoreShortCircuitTests {
    /// Two clients with allocations on one core; returns their relayed (advertised) addresses.
    private func pair(
        _ options: CoreFixture.Options = CoreFixture.options()
    ) throws -> (CoreHarness, TurnTestClient, TurnTestClient, TransportAddress, TransportAddress) {
        let pair = try RelayPair(loops: 1, options)
        return (pair.sender, pair.a, pair.b, pair.relayedA, pair.relayedB)
    }

    @Test("ChannelData from A to B's relayed address reaches B's client as ChannelData on B's channel, with no socket send")
    func channelToChannel() throws {
        let (harness, a, b, relayedA, relayedB) = try pair()
        #expect(try a.channelBind(0x4001, to: relayedB).isSuccess)
        #expect(try b.channelBind(0x4002, to: relayedA).isSuccess)
        let payload: [UInt8] = Array(0..<100)
        let sent = harness.receive(StunTestMessages.channelData(0x4001, payload), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        #expect(sent[0].peer == nil)
        #expect(sent[0].bytes == StunTestMessages.channelData(0x4002, payload))
        #expect(harness.counters.shortCircuited == 1)
        #expect(harness.counters.packetsToPeer == 1)
        #expect(harness.counters.packetsToClient == 1)
        #expect(harness.allocation(of: CoreFixture.clientA)?.traffic.bytesToPeer == 100)
        #expect(harness.allocation(of: CoreFixture.clientB)?.traffic.bytesToClient == 100)
    }

    /// On one loop (`loops` 1) or across loop threads through the shared directory (2).
    @Test(
        "A Send indication to B's relayed address reaches B as a Data indication from A's relayed address",
        arguments: [1, 2])
    func sendToDataIndication(loops: Int) throws {
        let pair = try RelayPair(loops: loops)
        let (harness, a, b, relayedA, relayedB) = (pair.sender, pair.a, pair.b, pair.relayedA, pair.relayedB)
        #expect(try a.createPermission([relayedB]).isSuccess)
        #expect(try b.createPermission([relayedA]).isSuccess)
        let payload: [UInt8] = [9, 8, 7, 6, 5]
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: payload), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        let data = try ReceivedStun(sent[0].bytes)
        #expect(data.type == MessageType(method: .data, messageClass: .indication))
        #expect(data.decode(XORPeerAddress.self)?.address == relayedA)
        #expect(data.decode(DataAttribute.self)?.bytes == payload)
    }

    @Test(
        "Without B's permission for A, the short-circuited packet is dropped as no_permission, as on the socket path",
        arguments: [1, 2])
    func permissionChecked(loops: Int) throws {
        let pair = try RelayPair(loops: loops)
        let (harness, a, relayedB) = (pair.sender, pair.a, pair.relayedB)
        #expect(try a.createPermission([relayedB]).isSuccess)
        // B holds a permission, for another peer: listed, so another loop judges it too.
        #expect(try pair.b.createPermission([CoreFixture.peer1]).isSuccess)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [1]), from: CoreFixture.clientA)
        #expect(sent.isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
        #expect(harness.counters.packetsToClient == 0)
    }

    @Test(
        "Before B's first permission, A's packet to B leaves through A's relay socket, for B's socket path to drop",
        arguments: [1, 2])
    func unlistedBeforeFirstPermission(loops: Int) throws {
        let pair = try RelayPair(loops: loops)
        let (harness, a, relayedB) = (pair.sender, pair.a, pair.relayedB)
        #expect(try a.createPermission([relayedB]).isSuccess)
        if loops > 1 { #expect(harness.core.tables.directory.count == 1) }
        #expect(pair.receiver.core.table.allocation(atRelayed: relayedB) == nil)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [1]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].peer?.peer == relayedB)
        #expect(harness.counters.dropped(.noPermission) == 0)
        #expect(harness.counters.shortCircuited == 0)
    }

    @Test("Behind 1:1 NAT: a packet for B's external-ip form reaches B from A's external-ip form, with no hairpin")
    func externalForm() throws {
        let config = CoreFixture.options {
            $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: .literal("203.0.113.7"))]
        }
        let (harness, a, b, relayedA, relayedB) = try pair(config)
        #expect(relayedA.ip == .literal("203.0.113.7"))
        #expect(try a.channelBind(0x4001, to: relayedB).isSuccess)
        #expect(try b.createPermission([relayedA]).isSuccess)
        let sent = harness.receive(StunTestMessages.channelData(0x4001, [42, 43]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        let data = try ReceivedStun(sent[0].bytes)
        #expect(data.decode(XORPeerAddress.self)?.address == relayedA)
        #expect(data.decode(DataAttribute.self)?.bytes == [42, 43])
    }

    @Test("A relay port of the relay address that no allocation holds is out of reach: 403, and data to it is dropped")
    func notAnAllocation() throws {
        let (harness, a, _, relayedA, relayedB) = try pair()
        // A relay port neither allocation holds: another process's socket could be bound there.
        let port = try #require(
            (CoreFixture.minPort...CoreFixture.maxPort).first { $0 != relayedA.port && $0 != relayedB.port })
        let other = TransportAddress(ip: relayedB.ip, port: port)
        #expect(try a.createPermission([other]).errorCode == 403)
        #expect(try a.channelBind(0x4000, to: other).errorCode == 403)
        // A permission for the IP (through B's live relayed address) does not open the port.
        #expect(try a.createPermission([relayedB]).isSuccess)
        let before = harness.counters.dropped(.policy)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: other, payload: [1, 2]), from: CoreFixture.clientA)
        #expect(sent.isEmpty)
        #expect(harness.counters.dropped(.policy) == before + 1)
        #expect(harness.counters.packetsToPeer == 0)
    }

    @Test("After B's allocation ends, A's permission for its relayed address passes no data either way")
    func deletedTarget() throws {
        let (harness, a, b, relayedA, relayedB) = try pair()
        #expect(try a.createPermission([relayedB]).isSuccess)
        #expect(try b.refresh(lifetime: 0).isSuccess)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: relayedB, payload: [1]), from: CoreFixture.clientA)
        #expect(sent.isEmpty)
        #expect(harness.counters.dropped(.policy) == 1)
        // Whatever binds B's old port now cannot reach A's client either.
        let socketA = try #require(harness.sockets.descriptor(boundTo: relayedA))
        #expect(harness.receiveFromPeer([9], from: relayedB, at: socketA).isEmpty)
        #expect(harness.counters.dropped(.policy) == 2)
    }
}

/// Relay-to-relay across loop threads behind 1:1 NAT: no hairpin needed.
@Suite struct CoreExternalFormTests {
    static let publicIP = IPAddress.literal("203.0.113.7")

    private func harness() -> CoreHarness {
        CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: Self.publicIP)]
            })
    }

    @Test("A packet for another thread's allocation in external-ip form leaves towards the bound (private) form")
    func outgoingUsesBoundForm() throws {
        let harness = harness()
        let a = harness.restClient(at: CoreFixture.clientA)
        #expect(try a.allocate().isSuccess)
        // A relayed address of this server that no allocation on this core holds: another
        // loop's (a DTLS client's, which the cross-loop directory does not list).
        harness.core.tables.ports.mark(CoreFixture.maxPort, on: CoreFixture.relayIP, as: .udpAllocation)
        let elsewhere = TransportAddress(ip: Self.publicIP, port: CoreFixture.maxPort)
        #expect(try a.createPermission([elsewhere]).isSuccess)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: elsewhere, payload: [7]), from: CoreFixture.clientA)
        #expect(sent.first?.peer?.peer == TransportAddress(ip: CoreFixture.relayIP, port: CoreFixture.maxPort))
    }

    @Test("A packet from one of the server's own relay sockets is shown to the client in external-ip form")
    func incomingShowsAdvertisedForm() throws {
        let harness = harness()
        let b = harness.restClient(at: CoreFixture.clientB)
        let relayedB = try #require(try b.allocate().xorRelayedAddress)
        let socketB = try #require(
            harness.sockets.descriptor(boundTo: TransportAddress(ip: CoreFixture.relayIP, port: relayedB.port)))
        // Another loop's allocation holds the relayed address the packet comes from.
        harness.core.tables.ports.mark(CoreFixture.maxPort, on: CoreFixture.relayIP, as: .udpAllocation)
        let other = TransportAddress(ip: Self.publicIP, port: CoreFixture.maxPort)
        #expect(try b.createPermission([other]).isSuccess)
        let atB = harness.receiveFromPeer(
            [1, 2, 3], from: TransportAddress(ip: CoreFixture.relayIP, port: CoreFixture.maxPort), at: socketB)
        let data = try ReceivedStun(try #require(atB.first).bytes)
        #expect(data.xorPeerAddress == other)
        #expect(data.data == [1, 2, 3])
    }
}
