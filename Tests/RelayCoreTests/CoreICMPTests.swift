import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// ICMP errors from peers (RFC 8656 §11.5): a Data indication with XOR-PEER-ADDRESS and ICMP, no
/// DATA, only under a permission for the peer's IP, at most `icmpIndicationsPerSecond` a second.
@Suite struct CoreICMPTests {
    private func allocated(_ options: CoreFixture.Options = CoreFixture.options()) throws -> (
        CoreHarness, TurnTestClient, RelaySocket
    ) {
        let harness = CoreHarness(options: options)
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)))
    }

    private func icmp(_ harness: CoreHarness, _ icmp: ICMP, peer: TransportAddress, at socket: RelaySocket) -> [SentPacket] {
        harness.core.handlePeerICMP(relaySocket: socket, peer: peer, icmp: icmp, now: harness.now)
        return harness.drainOutbox()
    }

    @Test("An ICMP error for a permitted peer reaches the client as a Data indication with ICMP and no DATA")
    func relayed() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        // Another port of the permitted IP: permissions compare addresses only.
        let port = TransportAddress(ip: CoreFixture.peer1.ip, port: 9)
        let sent = icmp(harness, ICMP(type: 3, code: 3, errorData: 0), peer: port, at: socket)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientA)
        let indication = try ReceivedStun(sent[0].bytes)
        #expect(indication.type == MessageType(method: .data, messageClass: .indication))
        #expect(indication.xorPeerAddress == port)
        #expect(indication.decode(ICMP.self) == ICMP(type: 3, code: 3, errorData: 0))
        #expect(indication.data == nil)
        #expect(indication.attributeTypes == [.xorPeerAddress, .icmp])
        #expect(harness.counters.icmpIndications == 1)
    }

    @Test("\"Fragmentation needed\" keeps its MTU, and FINGERPRINT is added when configured")
    func mtuAndFingerprint() throws {
        let (harness, client, socket) = try allocated(CoreFixture.options { $0.settings.fingerprint = true })
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let sent = icmp(harness, ICMP(type: 3, code: 4, errorData: 1280), peer: CoreFixture.peer1, at: socket)
        let indication = try ReceivedStun(try #require(sent.first).bytes)
        #expect(indication.decode(ICMP.self)?.errorData == 1280)
        #expect(indication.attributeTypes.last == .fingerprint)
    }

    @Test("Without a permission for the peer's IP, or for an unknown socket, the error is dropped and counted")
    func withoutPermission() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(icmp(harness, ICMP(type: 3, code: 3, errorData: 0), peer: CoreFixture.peer2, at: socket).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
        let unknown = RelaySocket(descriptor: 9999)
        #expect(icmp(harness, ICMP(type: 3, code: 3, errorData: 0), peer: CoreFixture.peer1, at: unknown).isEmpty)
        #expect(harness.counters.dropped(.noAllocation) == 1)
        #expect(harness.counters.icmpIndications == 0)
    }

    @Test("At most icmpIndicationsPerSecond a second per allocation; the next second gets more")
    func rateLimited() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let limit = RelayCore.icmpIndicationsPerSecond
        var delivered = 0
        for _ in 0..<(limit + 7) {
            delivered += icmp(harness, ICMP(type: 3, code: 3, errorData: 0), peer: CoreFixture.peer1, at: socket).count
        }
        #expect(delivered == limit)
        #expect(harness.counters.dropped(.icmp) == 7)
        harness.advance(by: 1)
        #expect(icmp(harness, ICMP(type: 11, code: 0, errorData: 0), peer: CoreFixture.peer1, at: socket).count == 1)
        #expect(harness.counters.icmpIndications == UInt64(limit + 1))
    }

    @Test("A TCP client's allocation gets the indication on its connection")
    func streamClient() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let sent = icmp(harness, ICMP(type: 3, code: 1, errorData: 0), peer: CoreFixture.peer1, at: socket)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientA)
        #expect(try ReceivedStun(sent[0].bytes).decode(ICMP.self)?.code == 1)
    }
}
