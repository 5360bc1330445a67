import StunCodec
import Testing

@testable import CoreTestSupport
@testable import RelayCore

/// A TCP allocation's machine on its own (RFC 6062): the per-allocation limit, a second
/// connection to one peer, pending Connects and what each is answered, without a `RelayCore`.
@Suite struct TCPRelayStateTests {
    static let now: Int64 = 1_000

    /// What a Connect's answer needs, from a Connect request with `transactionID`.
    private func pending(_ transactionID: TransactionID) throws -> PendingConnect {
        let bytes = try StunTestMessages.request(.connect, transactionID: transactionID)
        let target = try bytes.withUnsafeBytes { raw in ReplyTarget(try StunMessage(parsing: raw)) }
        return PendingConnect(request: target, key: IntegrityKey(bytes: [1, 2, 3], sha256: false))
    }

    /// A Connect to `peer` that was let through and recorded under `id`.
    private func connected(_ state: inout TCPRelayState, _ id: UInt32, to peer: TransportAddress, limit: Int = 16)
        throws
    {
        let decision = state.connect(to: peer, limit: limit, now: Self.now, isListed: { _ in true })
        #expect(decision == .reserve(deadline: Self.now + 60))
        state.connecting(PeerConnectionID(id), to: peer, answer: try pending(TransactionID(high: id, low: 0)))
    }

    @Test("Connect to a peer the allocation is connected or connecting to is 446, not counted (RFC 6062 §5.2)")
    func duplicatePeer() throws {
        var state = TCPRelayState()
        try connected(&state, 1, to: CoreFixture.peer1)
        let again = state.connect(to: CoreFixture.peer1, limit: 16, now: Self.now, isListed: { _ in true })
        #expect(again == .refuse(.duplicate))
        #expect(
            TCPPeerRefusal.duplicate.error == .connectionAlreadyExists && TCPPeerRefusal.duplicate.error.code == 446)
        #expect(TCPPeerRefusal.duplicate.counted == nil)
        // Another peer is fine; so is the first once its connection ended everywhere.
        try connected(&state, 2, to: CoreFixture.peer2)
        #expect(state.connectFinished(PeerConnectionID(1), connected: true) != nil)
        let listed: (PeerConnectionID) -> Bool = { $0 != PeerConnectionID(1) }
        #expect(
            state.connect(to: CoreFixture.peer1, limit: 16, now: Self.now, isListed: listed)
                == .reserve(deadline: Self.now + 60))
        #expect(state.peers == [PeerConnectionID(2): CoreFixture.peer2])
    }

    @Test(
        "At max-tcp-relay-connections, pending and piped together: Connect gets 508, a peer connecting in is refused; both counted"
    )
    func limit() throws {
        var state = TCPRelayState()
        try connected(&state, 1, to: CoreFixture.peer1, limit: 2)
        #expect(state.accept(limit: 2, now: Self.now, isListed: { _ in true }) == .reserve(deadline: Self.now + 30))
        state.accepted(PeerConnectionID(2), from: CoreFixture.peer2)
        let third = TransportAddress.literal("9.9.9.9:1")
        #expect(state.connect(to: third, limit: 2, now: Self.now, isListed: { _ in true }) == .refuse(.overLimit))
        #expect(state.accept(limit: 2, now: Self.now, isListed: { _ in true }) == .refuse(.overLimit))
        #expect(TCPPeerRefusal.overLimit.error == .insufficientCapacity && TCPPeerRefusal.overLimit.error.code == 508)
        #expect(TCPPeerRefusal.overLimit.counted == .refused)
        // The accepted connection ended (no longer listed): room again. The pending Connect stays
        // although the table does not list it.
        #expect(
            state.connect(to: third, limit: 2, now: Self.now, isListed: { _ in false })
                == .reserve(deadline: Self.now + 60))
        #expect(state.peers == [PeerConnectionID(1): CoreFixture.peer1])
        #expect(state.pendingConnects.keys.contains(PeerConnectionID(1)))
    }

    @Test(
        "A pending Connect is answered once: CONNECTION-ID when connected, 447 when not; a failed peer can be connected again"
    )
    func pendingAnsweredOnce() throws {
        var state = TCPRelayState()
        try connected(&state, 7, to: CoreFixture.peer1)
        try connected(&state, 8, to: CoreFixture.peer2)
        let finished = state.connectFinished(PeerConnectionID(7), connected: true)
        let answer = try #require(finished)
        guard case .connected(let id, let pending) = answer else { Issue.record("not connected: \(answer)"); return }
        #expect(id == PeerConnectionID(7) && pending.request.transactionID == TransactionID(high: 7, low: 0))
        #expect(pending.request.method == .connect && answer.outcome == .connected)
        #expect(state.connectFinished(PeerConnectionID(7), connected: true) == nil)
        #expect(state.connectFinished(PeerConnectionID(7), connected: false) == nil)
        #expect(state.peers[PeerConnectionID(7)] == CoreFixture.peer1)

        let lostConnect = state.connectFinished(PeerConnectionID(8), connected: false)
        let failed = try #require(lostConnect)
        guard case .failed(let lost) = failed else { Issue.record("not failed: \(failed)"); return }
        #expect(lost.request.transactionID == TransactionID(high: 8, low: 0) && failed.outcome == .failed)
        #expect(state.connectFinished(PeerConnectionID(8), connected: true) == nil)
        #expect(state.peers[PeerConnectionID(8)] == nil && state.pendingConnects.isEmpty)
        #expect(
            state.connect(to: CoreFixture.peer2, limit: 16, now: Self.now, isListed: { _ in true })
                == .reserve(deadline: Self.now + 60))
        // An id no Connect waits for (a peer that connected in) answers nothing.
        state.accepted(PeerConnectionID(9), from: TransportAddress.literal("9.9.9.9:1"))
        #expect(state.connectFinished(PeerConnectionID(9), connected: true) == nil)
    }

    @Test(
        "ConnectionBind's claim: the ready connection for its user; 441 for another user; 400 unknown, pending or bound (RFC 6062 §5.4)"
    )
    func connectionBind() {
        let table = TCPConnectionTable()
        var random = FastRandom(seed: 1)
        let state = TCPRelayState()
        let id = table.reserve(
            thread: LoopIndex(0), relaySocket: RelaySocket(descriptor: 10), username: "alice", peer: CoreFixture.peer1,
            account: state.account(budget: nil), deadline: Self.now + 30, random: &random)
        let claim = { (user: String) in table.claim(id, username: user, thread: LoopIndex(1)) }
        #expect(TCPRelayState.connectionBind(claim("alice")) == .refuse(.badRequest))  // still connecting
        #expect(table.park(id, peerSocket: PeerSocket(descriptor: 20), deadline: Self.now + 30))
        #expect(TCPRelayState.connectionBind(claim("bob")) == .refuse(.wrongCredentials))
        guard case .bind(let socket, let entry) = TCPRelayState.connectionBind(claim("alice")) else {
            Issue.record("not bound")
            return
        }
        #expect(
            socket == PeerSocket(descriptor: 20) && entry.peer == CoreFixture.peer1
                && entry.account.traffic === state.piped)
        #expect(TCPRelayState.connectionBind(claim("alice")) == .refuse(.badRequest))
        #expect(
            TCPRelayState.connectionBind(
                table.claim(PeerConnectionID(id.value &+ 1), username: "alice", thread: LoopIndex(1)))
                == .refuse(.badRequest))
        #expect(RelayError.wrongCredentials.code == 441 && RelayError.badRequest.code == 400)
    }
}
