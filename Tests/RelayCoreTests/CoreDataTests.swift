import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Send indications and peer datagrams (RFC 8656 §11); silent drops are counted by reason.
@Suite struct CoreDataTests {
    private func allocated() throws -> (CoreHarness, TurnTestClient, RelaySocket) {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)))
    }

    @Test(
        "A Send indication to a permitted peer is relayed from the allocation's socket with exactly its DATA (RFC 8656 §11.2)"
    )
    func sendIsRelayed() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        for length in [0, 1, 3, 4, 1300] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &+ 1) }
            let sent = harness.receive(
                try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: payload), from: CoreFixture.clientA)
            try #require(sent.count == 1)
            #expect(sent[0].peer?.relaySocket == socket)
            #expect(sent[0].peer?.peer == CoreFixture.peer1)
            #expect(sent[0].bytes == payload)
        }
        #expect(harness.counters.packetsToPeer == 5)
        #expect(harness.allocation(of: CoreFixture.clientA)?.traffic.bytesToPeer == 1308)
    }

    @Test("A Send indication with FINGERPRINT is relayed too")
    func sendWithFingerprint() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1, 2], fingerprint: true),
            from: CoreFixture.clientA)
        #expect(sent.first?.bytes == [1, 2])
    }

    @Test(
        "A Send indication with an unknown comprehension-required attribute is discarded, not relayed (RFC 8489 §6.3.2)"
    )
    func sendWithUnknownAttribute() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let indication = try StunTestMessages.build(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: CoreFixture.peer1))
            try w.append(DataAttribute(bytes: [1, 2, 3]))
            try w.append(AttributeType(rawValue: 0x7F00), value: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(harness.receive(indication, from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.malformed) == 1)
        #expect(harness.counters.packetsToPeer == 0)

        // An unknown comprehension-optional attribute is fine.
        let optional = try StunTestMessages.build(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: CoreFixture.peer1))
            try w.append(DataAttribute(bytes: [1, 2, 3]))
            try w.append(AttributeType(rawValue: 0xC0DE), value: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(harness.receive(optional, from: CoreFixture.clientA).first?.bytes == [1, 2, 3])
    }

    @Test("A Send indication without a permission is dropped and counted no_permission")
    func sendWithoutPermission() throws {
        let (harness, _, _) = try allocated()
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1]), from: CoreFixture.clientA)
        #expect(sent.isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
        #expect(harness.counters.packetsToPeer == 0)
    }

    @Test("A Send indication to a denied peer is dropped and counted policy, even with a permission for its IP")
    func sendToDeniedPeer() throws {
        let harness = CoreHarness(
            options: CoreFixture.options { $0.relayAddresses = [.unmapped(.literal("127.0.0.1"))] })
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        // Relay-to-relay makes 127.0.0.1 permitted on relay ports only.
        #expect(try client.createPermission([relayed]).isSuccess)
        let toListener = try StunTestMessages.sendIndication(to: .literal("127.0.0.1:3478"), payload: [1])
        #expect(harness.receive(toListener, from: CoreFixture.clientA).isEmpty)
        let toOtherPort = try StunTestMessages.sendIndication(to: .literal("127.0.0.1:40000"), payload: [1])
        #expect(harness.receive(toOtherPort, from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.policy) == 2)
    }

    @Test("A Send indication without an allocation is dropped as no_allocation; without DATA as malformed")
    func sendWithoutAllocationOrData() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(
            harness.receive(
                try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1]), from: CoreFixture.clientB
            ).isEmpty)
        #expect(harness.counters.dropped(.noAllocation) == 1)
        let noData = try StunTestMessages.build(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: CoreFixture.peer1))
        }
        #expect(harness.receive(noData, from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.malformed) == 1)
    }

    @Test("Data from a peer without a permission is dropped and counted no_permission (RFC 8656 §11.3)")
    func peerDataWithoutPermission() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer2, at: socket).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer1, at: RelaySocket(descriptor: 9999)).isEmpty)
        #expect(harness.counters.dropped(.noAllocation) == 1)
    }

    @Test(
        "Data arriving from a transport address the peer policy denies is dropped even when its IP has a permission",
        arguments: ["127.0.0.1:3478", "127.0.0.1:8080", "127.0.0.1:40000"])
    func peerDataFromDeniedAddress(source: String) throws {
        let harness = CoreHarness(
            options: CoreFixture.options { $0.relayAddresses = [.unmapped(.literal("127.0.0.1"))] })
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        #expect(try client.createPermission([relayed]).isSuccess)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(harness.receiveFromPeer([1], from: .literal(source), at: socket).isEmpty)
        #expect(harness.counters.dropped(.policy) == 1)
        #expect(harness.counters.packetsToClient == 0)
    }
}
