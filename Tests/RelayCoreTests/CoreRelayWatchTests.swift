import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A UDP relay socket is read from its allocation's first permission on
/// (`CoreCommand.watchRelaySocket`): before one, every peer packet is dropped (RFC 8656 §9), so
/// an idle allocation's socket is not polled (docs/benchmark.md, "Node capacity").
@Suite struct CoreRelayWatchTests {
    @Test("Allocate watches nothing; the first CreatePermission watches the socket, draining it; later ones do not")
    func firstPermission() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(harness.watched.isEmpty)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(harness.watched.map(\.socket) == [socket])
        #expect(harness.watched.map(\.drain) == [true])
        #expect(try client.createPermission([CoreFixture.peer2]).isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(harness.watched.count == 1)
        // A refused CreatePermission installs nothing and watches nothing.
        let refused = harness.restClient(at: CoreFixture.clientB)
        #expect(try refused.allocate().isSuccess)
        #expect(try refused.createPermission([]).errorCode == 400)
        #expect(harness.watched.count == 1)
    }

    @Test("A ChannelBind as the first permission watches the socket")
    func channelBindFirst() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(harness.watched.map(\.socket) == [socket])
    }

    @Test("Both relay sockets of a dual allocation are watched at its first permission (RFC 8656 §7.2 step 9)")
    func dual() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [IPAddress.literal("10.0.0.5"), IPAddress.literal("2001:db8::5")].map(
                    RelayAddress.unmapped)
            })
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate { w in try w.append(AdditionalAddressFamily(family: .ipv6)) }
        let relayed = answer.xorRelayedAddresses
        try #require(relayed.count == 2)
        let sockets = try relayed.map { try #require(harness.sockets.descriptor(boundTo: $0)) }
        #expect(harness.watched.isEmpty)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(Set(harness.watched.map(\.socket)) == Set(sockets))
    }

    @Test("An RFC 6062 allocation's relay listener is never watched here")
    func tcpAllocation() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        let response = try client.request(.allocate) { w in try w.append(RequestedTransport.tcp) }
        #expect(response.isSuccess, "\(response)")
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(harness.watched.isEmpty)
    }

    @Test("An adopted allocation with a live permission is watched without draining; one with none at its first")
    func adopted() throws {
        let (harness, client) = try CoreAdoptTests.setUp()
        try harness.core.adopt(CoreAdoptTests.adopted(harness, client: client), now: harness.now)
        _ = harness.drainOutbox()
        #expect(harness.watched.map(\.socket) == [CoreAdoptTests.socket])
        #expect(harness.watched.map(\.drain) == [false])

        let (idle, idleClient) = try CoreAdoptTests.setUp()
        var bare = CoreAdoptTests.adopted(idle, client: idleClient)
        bare.permissions = []
        bare.channels = []
        try idle.core.adopt(bare, now: idle.now)
        _ = idle.drainOutbox()
        #expect(idle.watched.isEmpty)
        #expect(try idleClient.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(idle.watched.map(\.socket) == [CoreAdoptTests.socket])
        #expect(idle.watched.map(\.drain) == [true])
    }
}
