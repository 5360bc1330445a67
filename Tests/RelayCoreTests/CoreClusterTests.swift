import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Allocations in a cluster (docs/cluster.md): an Allocate under a quota counted across nodes
/// waits for Redis's answer (`admitAllocation`, `handleAdmittedRequest`); a full or draining node
/// redirects to the least loaded other node (RFC 8489 §10, ALTERNATE-SERVER).
@Suite struct CoreClusterTests {
    static let otherNode = ClusterLink.Alternate(
        name: "b", addresses: [.literal("198.51.100.7:3478"), .literal("[2001:db8::7]:3478")], tlsPort: 5349)

    private func cluster(redisUp: Bool = true, alternates: [ClusterLink.Alternate] = [], totalQuota: Int = 0)
        -> ClusterLink
    {
        let link = ClusterLink(clusterTotalQuota: totalQuota)
        link.update(redisUp: redisUp)
        link.update(alternates: alternates)
        return link
    }

    private func harness(
        _ link: ClusterLink, userQuota: Int = 2, adjust: (inout CoreFixture.Options) -> Void = { _ in }
    ) -> CoreHarness {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.userQuota = userQuota
                adjust(&$0)
            }, cluster: link)
        harness.quota.startMirroring()
        return harness
    }

    /// The signed Allocate of `client` (after a 401 taught it the nonce), and what the core did with it.
    private func signedAllocate(_ harness: CoreHarness, _ client: TurnTestClient, at address: TransportAddress)
        throws -> (bytes: [UInt8], sent: [SentPacket])
    {
        try client.challenge()
        let bytes = try client.signedRequest(.allocate) { w in try w.append(RequestedTransport.udp) }
        return (bytes, harness.receive(bytes, from: address))
    }

    private func response(_ packets: [SentPacket], to client: TransportAddress) throws -> ReceivedStun {
        try ReceivedStun(try #require(packets.first { $0.client == client }).bytes)
    }

    @Test("An Allocate under a cluster-wide quota waits for Redis; granted, it succeeds and counts nothing twice")
    func grantedAfterTheCheck() throws {
        let harness = harness(cluster())
        let client = harness.restClient(at: CoreFixture.clientA)
        let (_, sent) = try signedAllocate(harness, client, at: CoreFixture.clientA)
        #expect(sent.isEmpty, "answered before Redis did")
        let request = try #require(harness.admissions.first)
        #expect(request.user == "alice" && request.thread == 0)
        let answer = try response(harness.answer(request, .granted), to: CoreFixture.clientA)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(harness.quota.count(user: "alice") == 1)
        // Redis counted it already: nothing more to tell it.
        #expect(harness.quota.takeDeltas().isEmpty)
    }

    @Test("Refused by Redis: 486 for the user's quota, 508 for the cluster's total")
    func refusedByRedis() throws {
        for (refusal, code) in [(RelayError.allocationQuotaReached, 486), (.insufficientCapacity, 508)] {
            let harness = harness(cluster(alternates: [Self.otherNode]))
            let client = harness.restClient(at: CoreFixture.clientA)
            _ = try signedAllocate(harness, client, at: CoreFixture.clientA)
            let answer = try response(
                harness.answer(try #require(harness.admissions.first), .refused(refusal)), to: CoreFixture.clientA)
            // A full cluster is not helped by a redirect: the error itself.
            #expect(answer.errorCode == code, "\(answer.description)")
            #expect(harness.core.allocationCount == 0)
            #expect(harness.quota.count(user: "alice") == 0)
        }
    }

    @Test("Redis late or away: the node decides on its own counts, and tells Redis later")
    func localDecision() throws {
        let harness = harness(cluster())
        let client = harness.restClient(at: CoreFixture.clientA)
        _ = try signedAllocate(harness, client, at: CoreFixture.clientA)
        let answer = try response(harness.answer(try #require(harness.admissions.first), .local), to: CoreFixture.clientA)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(harness.quota.takeDeltas().perUser == ["alice": 1])
    }

    @Test("No round trip when Redis is down, when no quota counts across nodes, or when this node alone is full")
    func noRoundTrip() throws {
        // Redis down: local.
        var h = harness(cluster(redisUp: false))
        #expect(try h.restClient(at: CoreFixture.clientA).allocate().isSuccess)
        #expect(h.admissions.isEmpty)
        // No user-quota and no cluster-total-quota: nothing to count across nodes.
        h = harness(cluster(), userQuota: 0)
        #expect(try h.restClient(at: CoreFixture.clientA).allocate().isSuccess)
        #expect(h.admissions.isEmpty)
        // user-quota 1, already held here: 486 without asking.
        h = harness(cluster(), userQuota: 1)
        let first = h.restClient(at: CoreFixture.clientA)
        _ = try signedAllocate(h, first, at: CoreFixture.clientA)
        _ = h.answer(try #require(h.admissions.first), .granted)
        let second = h.restClient(at: CoreFixture.clientB)
        #expect(try second.allocate().errorCode == 486)
        #expect(h.admissions.count == 1)
    }

    @Test("A retransmission while Redis is asked is not asked again; a granted retransmission hands its count back")
    func retransmissions() throws {
        let harness = harness(cluster())
        let client = harness.restClient(at: CoreFixture.clientA)
        let (bytes, _) = try signedAllocate(harness, client, at: CoreFixture.clientA)
        #expect(harness.receive(bytes, from: CoreFixture.clientA).isEmpty)
        #expect(harness.admissions.count == 1)
        let request = harness.admissions[0]
        #expect(try response(harness.answer(request, .granted), to: CoreFixture.clientA).isSuccess)
        _ = harness.quota.takeDeltas()
        // The same Allocate granted a second time (two copies went out after the patience ran
        // out): the original answer again, and Redis's second count goes back.
        let again = try response(harness.answer(request, .granted), to: CoreFixture.clientA)
        let original = try ReceivedStun(bytes)
        #expect(again.isSuccess && again.transactionID == original.transactionID)
        #expect(harness.quota.count(user: "alice") == 1)
        #expect(harness.quota.takeDeltas().perUser == ["alice": -1])
    }

    @Test("Draining: 300 with the least loaded other node of the client's family (its TLS port for TLS)")
    func drainingRedirects() throws {
        let link = cluster(alternates: [Self.otherNode])
        let harness = harness(link, userQuota: 0)
        var context = harness.core.context
        context.draining = true
        harness.core.update(context: context)
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate()
        #expect(answer.errorCode == 300, "\(answer.description)")
        #expect(answer.decode(AlternateServer.self)?.address == .literal("198.51.100.7:3478"))
        #expect(link.alternate(family: .ipv6, transport: .udp) == .literal("[2001:db8::7]:3478"))
        #expect(link.alternate(family: .ipv4, transport: .tls) == .literal("198.51.100.7:5349"))
        #expect(ClusterLink().alternate(family: .ipv4, transport: .udp) == nil)
    }

    @Test("Full (total-quota): 300 to another node; with a granted admission, Redis's count goes back")
    func fullRedirects() throws {
        let harness = harness(cluster(alternates: [Self.otherNode])) { $0.totalQuota = 1 }
        let first = harness.restClient(at: CoreFixture.clientA, user: "a")
        _ = try signedAllocate(harness, first, at: CoreFixture.clientA)
        #expect(try response(harness.answer(harness.admissions[0], .granted), to: CoreFixture.clientA).isSuccess)
        _ = harness.quota.takeDeltas()
        let second = harness.restClient(at: CoreFixture.clientB, user: "b")
        _ = try signedAllocate(harness, second, at: CoreFixture.clientB)
        let answer = try response(harness.answer(harness.admissions[1], .granted), to: CoreFixture.clientB)
        #expect(answer.errorCode == 300, "\(answer.description)")
        #expect(answer.decode(AlternateServer.self)?.address == .literal("198.51.100.7:3478"))
        #expect(harness.quota.takeDeltas().perUser == ["b": -1])
    }

    @Test("Quota deltas: local acquisitions and releases add up per user; a snapshot replaces them")
    func quotaDeltas() {
        let quota = QuotaTracker(userQuota: 0, totalQuota: 0)
        #expect(quota.acquire(user: "x") == nil)
        #expect(quota.takeDeltas().isEmpty, "no deltas before mirroring starts")
        quota.startMirroring()
        #expect(quota.acquire(user: "x") == nil)
        #expect(quota.acquire(user: "y") == nil)
        quota.release(user: "x")
        let deltas = quota.takeDeltas()
        #expect(deltas.perUser == ["y": 1] && deltas.total == 1)
        #expect(quota.acquire(user: "z", counted: true) == nil)
        #expect(quota.takeDeltas().isEmpty)
        quota.release(user: "y")
        let snapshot = quota.snapshotForMirror()
        #expect(snapshot.perUser == ["x": 1, "z": 1] && snapshot.total == 2)
        #expect(quota.takeDeltas().isEmpty)
    }

    @Test("A TCP client that closes while its Allocate is with Redis gets no allocation, and the count goes back")
    func streamClosedWhileAwaiting() throws {
        let harness = harness(cluster())
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        try client.challenge()
        let bytes = try client.signedRequest(.allocate) { w in try w.append(RequestedTransport.udp) }
        #expect(harness.receive(bytes, from: CoreFixture.clientA, transport: .tcp).isEmpty)
        let request = try #require(harness.admissions.first)
        harness.core.connectionClosed(harness.origin(CoreFixture.clientA, transport: .tcp), now: harness.now)
        harness.quota.noteGranted(user: "alice")
        #expect(harness.answer(request, .granted).isEmpty)
        #expect(harness.core.allocationCount == 0)
        #expect(harness.quota.count(user: "alice") == 0)
        #expect(harness.quota.takeDeltas().perUser == ["alice": -1])
        #expect(harness.quota.snapshotForMirror().total == 0, "the outstanding grant was handed back")
    }

    @Test("A grant still on its way to a loop counts in a share written anew")
    func outstandingGrantsInTheSnapshot() {
        let quota = QuotaTracker(userQuota: 2, totalQuota: 0)
        quota.startMirroring()
        quota.noteGranted(user: "u")
        #expect(quota.snapshotForMirror().perUser == ["u": 1])
        #expect(quota.acquire(user: "u", counted: true) == nil)
        #expect(quota.snapshotForMirror().perUser == ["u": 1], "taken: counted once, as an allocation")
    }

    @Test("Retransmissions while Redis is asked are not charged to allocate-rate-limit")
    func retransmissionsNotCharged() throws {
        let harness = harness(cluster()) { $0.allocateRateLimit = 1 }
        let client = harness.restClient(at: CoreFixture.clientA)
        let (bytes, _) = try signedAllocate(harness, client, at: CoreFixture.clientA)
        for _ in 0..<5 { #expect(harness.receive(bytes, from: CoreFixture.clientA).isEmpty) }
        let answer = try response(harness.answer(harness.admissions[0], .granted), to: CoreFixture.clientA)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(harness.counters.dropped(.rateLimited) == 0)
    }
}
