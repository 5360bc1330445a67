import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A TCP allocation (RFC 6062) in a live upgrade (docs/live-upgrade.md, "RFC 6062
/// connections"): its peer connections are listed for the heir as they stand, and the heir goes
/// on from them: a Connect in progress is answered there, a ready connection binds there, a
/// pipe's bytes are counted on from the old count.
@Suite struct CoreTCPRelayHandoverTests {
    @Test("A TCP allocation's connections go over as they stand, and the heir answers, binds and counts on")
    func connectionsGoOver() throws {
        let old = CoreHarness()
        let client = old.restClient(at: CoreFixture.clientA, transport: .tcp)
        let relayed = try #require(try client.request(.allocate) { w in try w.append(RequestedTransport.tcp) }.xorRelayedAddress)
        let listener = try #require(old.sockets.descriptor(boundTo: relayed))
        let peer3 = TransportAddress.literal("9.9.9.9:7000")
        #expect(try client.createPermission([CoreFixture.peer1, CoreFixture.peer2, peer3]).isSuccess)
        let tuple = try #require(old.allocation(of: CoreFixture.clientA, transport: .tcp)).origin.fiveTuple
        #expect(!old.core.streamClientCanMove(tuple), "only a heir that reads RFC 6062 state takes it")
        #expect(old.core.streamClientCanMove(tuple, tcpRelays: true))

        // peer1: connected by Connect, ready for its ConnectionBind.
        let connect = { (peer: TransportAddress) throws -> [UInt8] in
            try client.signedRequest(.connect) { w in try w.append(XORPeerAddress(address: peer)) }
        }
        #expect(old.receive(try connect(CoreFixture.peer1), from: CoreFixture.clientA, transport: .tcp).isEmpty)
        let ready = try #require(old.connects.last)
        #expect(old.core.peerConnectFinished(ready.id, relaySocket: listener, connected: true, now: old.now))
        #expect(old.core.tables.tcpConnections.park(ready.id, peerSocket: PeerSocket(descriptor: 71), deadline: old.now + 30))
        _ = old.drainOutbox()
        // peer2: its connect is in progress.
        let waiting = try connect(CoreFixture.peer2)
        let waitingID = try StunMessage(parsing: waiting.withUnsafeBytes { $0 }).transactionID
        #expect(old.receive(waiting, from: CoreFixture.clientA, transport: .tcp).isEmpty)
        let pending = try #require(old.connects.last)
        // peer3: connected in and piped by a data connection.
        let piped = try #require(old.core.peerConnectionArrived(on: listener, from: peer3, now: old.now))
        #expect(old.core.tables.tcpConnections.park(piped, peerSocket: PeerSocket(descriptor: 72), deadline: old.now + 30))
        let data = TransportAddress.literal("192.0.2.1:40999")
        let owner = old.client(at: data, username: client.username, password: client.password, transport: .tcp)
        #expect(try owner.request(.connectionBind) { w in try w.append(ConnectionID(value: piped.value)) }.isSuccess)
        let account = try #require(old.dataBinds.last?.account)
        let counted = account.traffic.add(.toPeer, bytes: 1000) && account.traffic.add(.toClient, bytes: 250)
        #expect(counted)
        _ = old.drainOutbox()

        let (snapshot, relaySocket, traffic) = try #require(old.core.tcpRelaySnapshot(tuple))
        #expect(relaySocket == listener && traffic === account.traffic)
        #expect(snapshot.bytesToPeer == 1000 && snapshot.bytesToClient == 250)
        let states = Dictionary(uniqueKeysWithValues: snapshot.connections.map { ($0.id, $0.state) })
        #expect(states[ready.id] == .ready)
        #expect(states[piped] == .piped(loop: 0))
        guard case .connecting(let answer?) = states[pending.id] else {
            Issue.record("the Connect in progress is not in the snapshot: \(snapshot)")
            return
        }
        #expect(answer.transactionID == waitingID && answer.method == Method.connect.rawValue)
        #expect(snapshot.pipedIDs == [piped])

        // The heir: the allocation with its connections, the ready one's socket, a fresh account
        // that goes on from the old count.
        let (allocation, _) = try #require(old.core.streamAllocation(tuple))
        let heir = CoreHarness()
        let socket = RelaySocket(descriptor: 901)
        heir.sockets.adopt(socket, bound: relayed)
        let origin = heir.origin(CoreFixture.clientA, transport: .tcp)
        var adopted = allocation.adopted(listener: origin.socket, main: socket, additional: nil, now: heir.now)
        let carried = PipeAccount(
            traffic: PipedTraffic(bytesToPeer: snapshot.bytesToPeer, bytesToClient: snapshot.bytesToClient), budget: nil)
        adopted.tcpRelay = AdoptedTCPRelay(
            snapshot: snapshot, readySockets: [ready.id: PeerSocket(descriptor: 501)], account: carried)
        try heir.core.adopt(adopted, now: heir.now)
        #expect(heir.core.tables.tcpConnections.count == 3)
        #expect(heir.core.tables.ports.isHeld(relayed.port, on: CoreFixture.relayIP, by: .tcpAllocation))
        let restored = try #require(heir.allocation(of: CoreFixture.clientA, transport: .tcp))
        #expect(restored.relayedTraffic.bytesToPeer == 1000 && restored.relayedTraffic.bytesToClient == 250)
        _ = heir.drainOutbox()

        // The Connect in progress is answered by the heir, signed with the key it came with.
        #expect(heir.core.peerConnectFinished(pending.id, relaySocket: socket, connected: true, now: heir.now))
        let sent = try #require(heir.drainOutbox().first { $0.client == CoreFixture.clientA })
        let response = try ReceivedStun(sent.bytes)
        #expect(response.isSuccess && response.type.method == .connect)
        #expect(response.transactionID == waitingID)
        #expect(response.decode(ConnectionID.self)?.value == pending.id.value)
        #expect(response.integrity(key: client.key) == .valid)
        // The ready connection binds with the heir, on the socket handed over.
        let heirOwner = heir.client(at: data, username: client.username, password: client.password, transport: .tcp)
        #expect(try heirOwner.request(.connectionBind) { w in try w.append(ConnectionID(value: ready.id.value)) }.isSuccess)
        #expect(heir.dataBinds.last?.peerSocket == PeerSocket(descriptor: 501))
        #expect(heir.dataBinds.last?.account == carried)
        // The piped connection is bound already: no second ConnectionBind takes it.
        #expect(try heirOwner.request(.connectionBind) { w in try w.append(ConnectionID(value: piped.value)) }.errorCode == 400)
        // The peers are the allocation's still: a second Connect to one is refused (446).
        let heirClient = heir.client(at: CoreFixture.clientA, username: client.username, password: client.password, transport: .tcp)
        let again = try heirClient.request(.connect) { w in try w.append(XORPeerAddress(address: CoreFixture.peer1)) }
        #expect(again.errorCode == 446)

        // The old process lets go: the summary counts what the pipes carried, without ending
        // the count (a pipe that could not move goes on there).
        old.core.releaseHandedOverStream(tuple, now: old.now)
        _ = old.drainOutbox()
        #expect(old.sessions.map(\.reason) == [.handedOver])
        #expect(!account.traffic.hasEnded)
    }

    @Test("While its allocation is handed over, no ConnectionBind takes a ready connection; after a failed upgrade one does")
    func readyConnectionsAreHeld() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        let relayed = try #require(try client.request(.allocate) { w in try w.append(RequestedTransport.tcp) }.xorRelayedAddress)
        let listener = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let id = try #require(harness.core.peerConnectionArrived(on: listener, from: CoreFixture.peer1, now: harness.now))
        #expect(harness.core.tables.tcpConnections.park(id, peerSocket: PeerSocket(descriptor: 81), deadline: harness.now + 30))
        _ = harness.drainOutbox()
        let table = harness.core.tables.tcpConnections
        let held = table.handingOver(true, thread: harness.core.context.loop, relaySocket: listener)
        #expect(held.map(\.id) == [id] && held.allSatisfy(\.handingOver))
        let data = TransportAddress.literal("192.0.2.1:40999")
        let owner = harness.client(at: data, username: client.username, password: client.password, transport: .tcp)
        #expect(try owner.request(.connectionBind) { w in try w.append(ConnectionID(value: id.value)) }.errorCode == 400)
        _ = table.handingOver(false, thread: harness.core.context.loop, relaySocket: listener)
        #expect(try owner.request(.connectionBind) { w in try w.append(ConnectionID(value: id.value)) }.isSuccess)
    }
}
