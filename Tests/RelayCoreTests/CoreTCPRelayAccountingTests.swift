import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A TCP allocation's pipes (RFC 6062 §5.5) against its `max-bps` budget and in its traffic
/// figures: the admin API's, the per-user figures and the session summary (docs/tcp-relay.md).
@Suite struct CoreTCPRelayAccountingTests {
    @Test("Piped traffic counts each direction, and once ended refuses more and keeps its final counts")
    func pipedTrafficEnds() {
        let piped = PipedTraffic()
        #expect(piped.add(.toPeer, bytes: 1200))
        #expect(piped.add(.toClient, bytes: 34))
        #expect(piped.add(.toPeer, bytes: 5))
        #expect(piped.current == TrafficCounters(bytesToPeer: 1205, bytesToClient: 34))
        #expect(!piped.hasEnded)
        #expect(piped.end() == TrafficCounters(bytesToPeer: 1205, bytesToClient: 34))
        #expect(piped.hasEnded)
        #expect(!piped.add(.toPeer, bytes: 1))
        #expect(!piped.add(.toClient, bytes: 1))
        #expect(piped.current == TrafficCounters(bytesToPeer: 1205, bytesToClient: 34))
    }

    @Test("Pipes on other threads adding while the allocation ends: the final count is exactly what they were let add")
    func pipedTrafficEndsExactlyAcrossThreads() async {
        let piped = PipedTraffic()
        // Four tasks on the global executor's threads: one ends the traffic and returns the final
        // count, the others return the bytes they were let add.
        let (accepted, final) = await withTaskGroup(of: (UInt64, TrafficCounters?).self) { group in
            for index in 0..<4 {
                group.addTask {
                    if index == 0 {
                        // The allocation's loop ends it while the others still pipe (or after 2 s at most).
                        let deadline = ContinuousClock.now + .seconds(2)
                        while piped.current.bytesToPeer < 200_000 && ContinuousClock.now < deadline {}
                        return (0, piped.end())
                    }
                    var mine: UInt64 = 0
                    for _ in 0..<400_000 {
                        guard piped.add(.toPeer, bytes: 3) else { break }
                        mine += 3
                    }
                    return (mine, nil)
                }
            }
            var accepted: UInt64 = 0
            var final: TrafficCounters?
            for await (mine, ended) in group {
                accepted += mine
                final = ended ?? final
            }
            return (accepted, final)
        }
        #expect(final?.bytesToPeer == accepted)
        #expect(piped.current.bytesToPeer == accepted)
    }

    @Test("A grant takes what is left of the second, up to what was asked, and nothing once it is spent")
    func budgetGrant() {
        let budget = BandwidthBudget(bytesPerSecond: 1000)
        let t: Int64 = 1_700_000_000
        #expect(budget.grant(.toClient, upTo: 600, now: t) == 600)
        #expect(budget.grant(.toClient, upTo: 600, now: t) == 400)
        #expect(budget.grant(.toClient, upTo: 600, now: t) == 0)
        // The other direction and datagrams share the same words.
        #expect(budget.grant(.toPeer, upTo: 10, now: t) == 10)
        #expect(!budget.admit(.toPeer, bytes: 991, now: t))
        #expect(budget.admit(.toPeer, bytes: 990, now: t))
        #expect(budget.grant(.toPeer, upTo: 1, now: t) == 0)
        // A grant a read did not use goes back.
        budget.refund(.toClient, bytes: 250, now: t)
        #expect(budget.grant(.toClient, upTo: 600, now: t) == 250)
        // The next second starts anew.
        #expect(budget.grant(.toClient, upTo: 5000, now: t + 1) == 1000)
        #expect(budget.used(.toClient, now: t + 1) == 1000)
    }

    /// A TCP allocation of clientA with a peer connection bound to a data connection: the harness,
    /// the client and the command the I/O layer got for the pipe.
    private func piped(maxBPS: Int) throws -> (CoreHarness, TurnTestClient, DataConnectionBind) {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.maxBPS = maxBPS })
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        let response = try client.request(.allocate) { w in try w.append(RequestedTransport.tcp) }
        let relayed = try #require(response.xorRelayedAddress, "\(response)")
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let id = try #require(harness.core.peerConnectionArrived(on: socket, from: CoreFixture.peer1, now: harness.now))
        _ = harness.drainOutbox()
        #expect(harness.core.tables.tcpConnections.park(id, peerSocket: PeerSocket(descriptor: 91), deadline: harness.now + 30))
        let data = harness.client(
            at: .literal("192.0.2.1:40999"), username: client.username, password: client.password, transport: .tcp)
        #expect(try data.request(.connectionBind) { w in try w.append(ConnectionID(value: id.value)) }.isSuccess)
        return (harness, client, try #require(harness.dataBinds.last))
    }

    @Test("ConnectionBind hands the pipe its allocation's max-bps budget and piped-traffic count")
    func bindCarriesTheAccount() throws {
        let (harness, _, bind) = try piped(maxBPS: 64_000)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA, transport: .tcp))
        let budget = try #require(bind.account.budget)
        #expect(budget === allocation.bandwidth)
        #expect(budget.bytesPerSecond == 64_000)
        #expect(bind.account.traffic === allocation.tcpRelay?.piped)
        let (unlimited, _, free) = try piped(maxBPS: 0)
        #expect(free.account.budget == nil)
        #expect(free.account.traffic === unlimited.allocation(of: CoreFixture.clientA, transport: .tcp)?.tcpRelay?.piped)
    }

    @Test("Piped bytes count in the admin API's traffic and the per-user traffic")
    func adminTrafficIncludesPipedBytes() throws {
        let (harness, _, bind) = try piped(maxBPS: 0)
        #expect(bind.account.traffic.add(.toPeer, bytes: 70_001))
        #expect(bind.account.traffic.add(.toClient, bytes: 103_334))
        let record = try #require(harness.core.allocationRecords(.all, now: harness.now).first)
        #expect(record.traffic.bytesToPeer == 70_001 && record.traffic.bytesToClient == 103_334)
        let user = try #require(harness.core.userTraffic().values.first)
        #expect(user.traffic.bytesToPeer == 70_001 && user.traffic.bytesToClient == 103_334)
    }

    @Test("The session summary counts piped bytes, and a pipe still open when the allocation ends can add no more")
    func summaryIncludesPipedBytes() throws {
        let (harness, client, bind) = try piped(maxBPS: 0)
        #expect(bind.account.traffic.add(.toPeer, bytes: 4_321))
        #expect(bind.account.traffic.add(.toClient, bytes: 8_765))
        #expect(try client.refresh(lifetime: 0).isSuccess)
        let summary = try #require(harness.sessions.last)
        #expect(summary.traffic.bytesToPeer == 4_321 && summary.traffic.bytesToClient == 8_765)
        // The pipe's thread has not closed it yet: what it reads now is refused, not lost from the count.
        #expect(!bind.account.traffic.add(.toClient, bytes: 1))
        #expect(bind.account.traffic.hasEnded)
    }
}
