import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Behind `external-ip`, only relayd's own relayed addresses (a relay address, a port in the relay
/// port range) have a second, advertised form. A peer that shares the relay's host on another
/// port (an SFU, a media server, a test peer allowed with `allowed-peer-ip`) is known to its
/// clients by the address it really has, in both directions: permissions, channels and Data
/// indications name that address (RFC 8656 §9, §11.3, §12; docs/external-ip.md).
@Suite struct CoreExternalIPPeerTests {
    static let publicIP = IPAddress.literal("203.0.113.7")
    /// A peer on the relay's own private address, outside the relay port range.
    static let coLocated = TransportAddress(ip: CoreFixture.relayIP, port: 3483)

    private func harness() -> CoreHarness {
        CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: Self.publicIP)]
                $0.allowedPeerIPs = [IPRange("10.0.0.5")!, IPRange("203.0.113.7")!]
            })
    }

    /// Client B with an allocation, and the descriptor of its relay socket.
    private func allocated(_ harness: CoreHarness) throws -> (TurnTestClient, TransportAddress, RelaySocket) {
        let b = harness.restClient(at: CoreFixture.clientB)
        let relayedB = try #require(try b.allocate().xorRelayedAddress)
        #expect(relayedB.ip == Self.publicIP)
        let socket = try #require(
            harness.sockets.descriptor(boundTo: TransportAddress(ip: CoreFixture.relayIP, port: relayedB.port)))
        return (b, relayedB, socket)
    }

    /// A relay port that is not `relayed`'s (another allocation's relayed address, as seen from B).
    /// The relayed port of another live allocation of this node (another loop's).
    private func otherRelayPort(than relayed: TransportAddress, in harness: CoreHarness) throws -> UInt16 {
        let port = try #require((CoreFixture.minPort...CoreFixture.maxPort).first { $0 != relayed.port })
        harness.core.tables.ports.mark(port, on: CoreFixture.relayIP, as: .udpAllocation)
        return port
    }

    @Test("A co-located peer's datagram keeps its real address: a Data indication from it, under its permission")
    func dataIndicationFromCoLocatedPeer() throws {
        let harness = harness()
        let (b, _, socketB) = try allocated(harness)
        #expect(try b.createPermission([Self.coLocated]).isSuccess)
        let atB = harness.receiveFromPeer([1, 2, 3], from: Self.coLocated, at: socketB)
        try #require(atB.count == 1)
        let data = try ReceivedStun(atB[0].bytes)
        #expect(data.xorPeerAddress == Self.coLocated)
        #expect(data.data == [1, 2, 3])
        #expect(harness.counters.dropped(.noPermission) == 0)
    }

    @Test("A co-located peer with a channel bound to its real address gets ChannelData on that channel")
    func channelDataFromCoLocatedPeer() throws {
        let harness = harness()
        let (b, _, socketB) = try allocated(harness)
        #expect(try b.channelBind(0x4005, to: Self.coLocated).isSuccess)
        let atB = harness.receiveFromPeer([9, 9], from: Self.coLocated, at: socketB)
        try #require(atB.count == 1)
        #expect(ReceivedChannelData(atB[0].bytes) == ReceivedChannelData(StunTestMessages.channelData(0x4005, [9, 9])))
    }

    @Test("A permission for the public form does not let the co-located peer's real address in")
    func publicFormPermissionDoesNotCover() throws {
        let harness = harness()
        let (b, _, socketB) = try allocated(harness)
        #expect(try b.createPermission([TransportAddress(ip: Self.publicIP, port: 3483)]).isSuccess)
        #expect(harness.receiveFromPeer([1], from: Self.coLocated, at: socketB).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
    }

    @Test("A Send to the public form on a port outside the relay range leaves for that address unchanged")
    func publicFormOtherPortIsNotRewritten() throws {
        let harness = harness()
        let (b, _, _) = try allocated(harness)
        let publicPeer = TransportAddress(ip: Self.publicIP, port: 3483)
        #expect(try b.createPermission([publicPeer]).isSuccess)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: publicPeer, payload: [4]), from: CoreFixture.clientB)
        #expect(sent.first?.peer?.peer == publicPeer)
    }

    @Test("A relay-to-relay packet through the sockets keeps the bound form when the client permitted only that")
    func ownRelaySourceKeepsBoundFormWhenOnlyThatIsPermitted() throws {
        let harness = harness()
        let (b, relayedB, socketB) = try allocated(harness)
        let otherBound = TransportAddress(ip: CoreFixture.relayIP, port: try otherRelayPort(than: relayedB, in: harness))
        #expect(try b.createPermission([otherBound]).isSuccess)
        let atB = harness.receiveFromPeer([5], from: otherBound, at: socketB)
        let data = try ReceivedStun(try #require(atB.first).bytes)
        #expect(data.xorPeerAddress == otherBound)
    }

    @Test("A relay-to-relay packet through the sockets takes the advertised form a channel is bound to")
    func ownRelaySourceTakesAdvertisedChannel() throws {
        let harness = harness()
        let (b, relayedB, socketB) = try allocated(harness)
        let port = try otherRelayPort(than: relayedB, in: harness)
        #expect(try b.channelBind(0x4006, to: TransportAddress(ip: Self.publicIP, port: port)).isSuccess)
        let atB = harness.receiveFromPeer([6, 7], from: TransportAddress(ip: CoreFixture.relayIP, port: port), at: socketB)
        try #require(atB.count == 1)
        #expect(ReceivedChannelData(atB[0].bytes) == ReceivedChannelData(StunTestMessages.channelData(0x4006, [6, 7])))
    }
}

/// The form a relay-to-relay packet's source takes is the target's choice (`knownForm`), on one
/// loop and across loops alike: the advertised form unless the target permitted only the bound
/// one, whichever form the sender addressed the target by.
@Suite struct CoreRelayToRelayFormTests {
    static let publicIP = IPAddress.literal("203.0.113.7")

    private func pair(loops: Int) throws -> RelayPair {
        try RelayPair(
            loops: loops,
            CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: Self.publicIP)]
            })
    }

    private func bound(_ advertised: TransportAddress) -> TransportAddress {
        TransportAddress(ip: CoreFixture.relayIP, port: advertised.port)
    }

    @Test(
        "B permitted only A's bound form; A addresses B by either form: B gets it from A's bound form",
        arguments: [1, 2], [true, false])
    func boundOnlyPermission(loops: Int, addressAdvertised: Bool) throws {
        let pair = try pair(loops: loops)
        #expect(try pair.b.createPermission([bound(pair.relayedA)]).isSuccess)
        let target = addressAdvertised ? pair.relayedB : bound(pair.relayedB)
        #expect(try pair.a.createPermission([target]).isSuccess)
        let sent = pair.sender.receive(
            try StunTestMessages.sendIndication(to: target, payload: [1, 2]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientB)
        let data = try ReceivedStun(sent[0].bytes)
        #expect(data.xorPeerAddress == bound(pair.relayedA))
        #expect(pair.sender.counters.dropped(.noPermission) == 0)
    }

    @Test(
        "B bound a channel to A's advertised form; A addresses B by its bound form: ChannelData on that channel",
        arguments: [1, 2])
    func advertisedChannel(loops: Int) throws {
        let pair = try pair(loops: loops)
        #expect(try pair.b.channelBind(0x4009, to: pair.relayedA).isSuccess)
        #expect(try pair.a.createPermission([bound(pair.relayedB)]).isSuccess)
        let sent = pair.sender.receive(
            try StunTestMessages.sendIndication(to: bound(pair.relayedB), payload: [7]), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(ReceivedChannelData(sent[0].bytes) == ReceivedChannelData(StunTestMessages.channelData(0x4009, [7])))
    }
}
