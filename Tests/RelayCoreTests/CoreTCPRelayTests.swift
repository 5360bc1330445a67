import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// TCP allocations (RFC 6062): Allocate, Connect, peers connecting in, ConnectionBind, limits.
@Suite struct CoreTCPRelayTests {
    /// A TCP allocation of clientA over TCP: the harness, the client and its relay listener.
    private func allocated(_ adjust: (inout CoreFixture.Options) -> Void = { _ in }) throws
        -> (CoreHarness, TurnTestClient, RelaySocket)
    {
        let harness = CoreHarness(options: CoreFixture.options(adjust))
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        let response = try client.request(.allocate) { w in try w.append(RequestedTransport.tcp) }
        let relayed = try #require(response.xorRelayedAddress, "\(response)")
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(harness.sockets.tcpListeners.contains(socket))
        return (harness, client, socket)
    }

    /// Sends Connect for `peer` and returns what came back at once (nothing, when the connect started).
    private func connect(_ harness: CoreHarness, _ client: TurnTestClient, to peer: TransportAddress) throws -> [SentPacket] {
        let request = try client.signedRequest(.connect) { w in try w.append(XORPeerAddress(address: peer)) }
        return harness.receive(request, from: CoreFixture.clientA, transport: .tcp)
    }

    private func finish(_ harness: CoreHarness, _ request: PeerConnect, connected: Bool) throws -> (Bool, ReceivedStun) {
        let kept = harness.core.peerConnectFinished(
            request.id, relaySocket: request.relaySocket, connected: connected, now: harness.now)
        let answer = try #require(harness.drainOutbox().first { $0.client == CoreFixture.clientA })
        return (kept, try ReceivedStun(answer.bytes))
    }

    @Test("A TCP Allocate over UDP, or with EVEN-PORT or DONT-FRAGMENT, gets 400; with no-tcp-relay, 442 (RFC 6062 §5.1)")
    func allocateChecks() throws {
        let harness = CoreHarness()
        let udp = harness.restClient(at: CoreFixture.clientA)
        #expect(try udp.request(.allocate) { w in try w.append(RequestedTransport.tcp) }.errorCode == 400)
        let tcp = harness.restClient(at: CoreFixture.clientB, transport: .tcp)
        #expect(
            try tcp.request(.allocate) { w in
                try w.append(RequestedTransport.tcp)
                try w.append(EvenPort(reservePair: false))
            }.errorCode == 400)
        #expect(
            try tcp.request(.allocate) { w in
                try w.append(RequestedTransport.tcp)
                try w.append(DontFragment())
            }.errorCode == 400)
        let off = CoreHarness(options: CoreFixture.options { $0.settings.tcpRelay = false })
        let refused = off.restClient(at: CoreFixture.clientA, transport: .tls)
        #expect(try refused.request(.allocate) { w in try w.append(RequestedTransport.tcp) }.errorCode == 442)
        #expect(harness.sockets.tcpListeners.isEmpty)
    }

    @Test("Connect needs a permission (403); it answers CONNECTION-ID once connected, 446 for the same peer again")
    func connect() throws {
        let (harness, client, socket) = try allocated()
        let denied = try #require(try connect(harness, client, to: CoreFixture.peer1).first)
        #expect(try ReceivedStun(denied.bytes).errorCode == 403)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(try connect(harness, client, to: CoreFixture.peer1).isEmpty)
        let request = try #require(harness.connects.last)
        #expect(request.peer == CoreFixture.peer1 && request.relaySocket == socket)
        let (kept, answer) = try finish(harness, request, connected: true)
        #expect(kept && answer.isSuccess && answer.type.method == .connect)
        #expect(answer.decode(ConnectionID.self)?.value == request.id.value)
        #expect(answer.integrity(key: client.key) == .valid)
        #expect(harness.core.tables.tcpConnections.park(request.id, peerSocket: PeerSocket(descriptor: 77), deadline: harness.now + 30))
        let again = try #require(try connect(harness, client, to: CoreFixture.peer1).first)
        #expect(try ReceivedStun(again.bytes).errorCode == 446)
        #expect(harness.counters.tcpConnections[TCPConnectionOutcome.connected.rawValue] == 1)
    }

    @Test("A connect that fails gets 447 and frees the peer for another Connect")
    func connectFailure() throws {
        let (harness, client, _) = try allocated()
        _ = try client.createPermission([CoreFixture.peer1])
        _ = try connect(harness, client, to: CoreFixture.peer1)
        let (kept, answer) = try finish(harness, try #require(harness.connects.last), connected: false)
        #expect(!kept && answer.errorCode == 447)
        #expect(harness.core.tables.tcpConnections.count == 0)
        #expect(try connect(harness, client, to: CoreFixture.peer1).isEmpty)
    }

    @Test("More peer connections than max-tcp-relay-connections: Connect gets 508, a peer connecting in is refused")
    func limit() throws {
        let (harness, client, socket) = try allocated { $0.settings.maxTCPConnectionsPerAllocation = 1 }
        _ = try client.createPermission([CoreFixture.peer1, CoreFixture.peer2])
        _ = try connect(harness, client, to: CoreFixture.peer1)
        let refused = try #require(try connect(harness, client, to: CoreFixture.peer2).first)
        #expect(try ReceivedStun(refused.bytes).errorCode == 508)
        #expect(harness.core.peerConnectionArrived(on: socket, from: CoreFixture.peer2, now: harness.now) == nil)
    }

    @Test("A peer connecting in with a permission gets a ConnectionAttempt; without one it is refused (RFC 6062 §5.3)")
    func inbound() throws {
        let (harness, client, socket) = try allocated()
        #expect(harness.core.peerConnectionArrived(on: socket, from: CoreFixture.peer1, now: harness.now) == nil)
        _ = try client.createPermission([CoreFixture.peer1])
        let id = try #require(harness.core.peerConnectionArrived(on: socket, from: CoreFixture.peer1, now: harness.now))
        let sent = try #require(harness.drainOutbox().first { $0.client == CoreFixture.clientA })
        let attempt = try ReceivedStun(sent.bytes)
        #expect(attempt.type == MessageType(method: .connectionAttempt, messageClass: .indication))
        #expect(attempt.decode(ConnectionID.self)?.value == id.value)
        #expect(attempt.decode(XORPeerAddress.self)?.address == CoreFixture.peer1)
    }

    @Test("ConnectionBind takes a ready connection once, for the allocation's user only (RFC 6062 §5.4)")
    func connectionBind() throws {
        let (harness, client, socket) = try allocated()
        _ = try client.createPermission([CoreFixture.peer1])
        let id = try #require(harness.core.peerConnectionArrived(on: socket, from: CoreFixture.peer1, now: harness.now))
        _ = harness.drainOutbox()
        #expect(harness.core.tables.tcpConnections.park(id, peerSocket: PeerSocket(descriptor: 91), deadline: harness.now + 30))
        let data = TransportAddress.literal("192.0.2.1:40999")
        let bind = { (who: TurnTestClient, cid: UInt32) throws -> ReceivedStun in
            try who.request(.connectionBind) { w in try w.append(ConnectionID(value: cid)) }
        }
        let other = harness.restClient(at: data, user: "bob", transport: .tcp)
        #expect(try bind(other, id.value).errorCode == 441)
        let owner = harness.client(at: data, username: client.username, password: client.password, transport: .tcp)
        #expect(try bind(owner, id.value ^ 1).errorCode == 400)
        let bound = try bind(owner, id.value)
        #expect(bound.isSuccess && bound.integrity(key: owner.key) == .valid)
        let command = try #require(harness.dataBinds.last)
        #expect(command.id == id && command.peerSocket == PeerSocket(descriptor: 91) && command.origin.fiveTuple.client == data)
        #expect(try bind(owner, id.value).errorCode == 400)
        // Over UDP there is no data connection.
        let udp = harness.client(at: data, username: client.username, password: client.password)
        #expect(try bind(udp, id.value).errorCode == 400)
    }

    @Test("A TCP allocation has no channels (400) and drops Send indications")
    func noDatagrams() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).errorCode == 400)
        _ = try client.createPermission([CoreFixture.peer1])
        let send = try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1, 2, 3])
        #expect(harness.receive(send, from: CoreFixture.clientA, transport: .tcp).isEmpty)
        #expect(harness.counters.dropped(.unexpectedMessage) == 1)
    }
}
