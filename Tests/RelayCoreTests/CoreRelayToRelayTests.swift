import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Two clients of one relay reaching each other through their relayed addresses: the most common
/// WebRTC path, allowed although the relay address is loopback/private and such peers are not.
@Suite struct CoreRelayToRelayTests {
    @Test(
        "A permission for another allocation's relayed address is allowed, and data flows both ways",
        arguments: ["127.0.0.1", "10.0.0.5"])
    func relayToRelay(relayIP: String) throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [.unmapped(.literal(relayIP))]
                $0.allowLoopbackPeers = false
            })
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        let bob = harness.restClient(at: CoreFixture.clientB, user: "bob")
        let relayA = try #require(try alice.allocate().xorRelayedAddress)
        let relayB = try #require(try bob.allocate().xorRelayedAddress)
        let socketA = try #require(harness.sockets.descriptor(boundTo: relayA))
        let socketB = try #require(harness.sockets.descriptor(boundTo: relayB))

        #expect(try alice.createPermission([relayB]).isSuccess)
        #expect(try bob.channelBind(0x4000, to: relayA).isSuccess)

        // Alice -> Bob on one core: short-circuited to Bob as ChannelData (Bob bound a channel to relay A).
        let toB = harness.receive(
            try StunTestMessages.sendIndication(to: relayB, payload: Array("ping".utf8)), from: CoreFixture.clientA)
        try #require(toB.count == 1)
        #expect(toB[0].client == CoreFixture.clientB)
        #expect(ReceivedChannelData(toB[0].bytes) == ReceivedChannelData(StunTestMessages.channelData(0x4000, Array("ping".utf8))))

        // Bob -> Alice on one core: a Data indication (Alice has no channel).
        let toA = harness.receive(StunTestMessages.channelData(0x4000, Array("pong".utf8)), from: CoreFixture.clientB)
        try #require(toA.count == 1)
        #expect(toA[0].client == CoreFixture.clientA)
        let direct = try ReceivedStun(toA[0].bytes)
        #expect(direct.xorPeerAddress == relayB)
        #expect(direct.data == Array("pong".utf8))

        // The socket path (the two allocations on different loop threads) frames the same way.
        let viaSocketB = harness.receiveFromPeer(Array("ping".utf8), from: relayA, at: socketB)
        #expect(
            ReceivedChannelData(try #require(viaSocketB.first).bytes)
                == ReceivedChannelData(StunTestMessages.channelData(0x4000, Array("ping".utf8))))
        #expect(viaSocketB.first?.client == CoreFixture.clientB)
        let viaSocketA = harness.receiveFromPeer(Array("pong".utf8), from: relayB, at: socketA)
        let indication = try ReceivedStun(try #require(viaSocketA.first).bytes)
        #expect(indication.xorPeerAddress == relayB)
        #expect(indication.data == Array("pong".utf8))
        #expect(harness.counters.shortCircuited == 2)
    }

    @Test("Relay-to-relay works through the advertised external-ip, even a special-purpose one")
    func relayToRelayViaExternalIP() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: .literal("203.0.113.5"))]
            })
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        let bob = harness.restClient(at: CoreFixture.clientB, user: "bob")
        #expect(try alice.allocate().isSuccess)
        let relayB = try #require(try bob.allocate().xorRelayedAddress)
        #expect(relayB.ip == .literal("203.0.113.5"))
        #expect(try alice.createPermission([relayB]).isSuccess)
        #expect(try alice.channelBind(0x4000, to: relayB).isSuccess)
    }

    @Test(
        "The relay address outside the relay port range, or on a service port, stays denied: 403",
        arguments: ["127.0.0.1:3478", "127.0.0.1:49999", "127.0.0.1:50010", "127.0.0.1:8080"])
    func relayAddressOtherPorts(peer: String) throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [.unmapped(.literal("127.0.0.1"))]
                $0.allowLoopbackPeers = false
            })
        let alice = harness.restClient(at: CoreFixture.clientA)
        #expect(try alice.allocate().isSuccess)
        #expect(try alice.createPermission([.literal(peer)]).errorCode == 403)
    }
}
