import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The core's side of admission (docs/architecture.md, "Admission"), driven against a scripted
/// ledger: a pending Allocate waits without an answer and resumes on the decision; a lease is
/// held by its allocation and given back exactly once, whatever path the Allocate takes.
@Suite struct CoreAdmissionTests {
    static let otherNode = TransportAddress.literal("198.51.100.7:3478")

    private func harness(
        holding: Bool = true, alternate: TransportAddress? = nil, adjust: (inout CoreFixture.Options) -> Void = { _ in }
    ) -> (CoreHarness, ScriptedLedger) {
        var scripted: ScriptedLedger? = nil
        let harness = CoreHarness(options: CoreFixture.options(adjust)) { local in
            let ledger = ScriptedLedger(local: local, holding: holding, alternate: alternate)
            scripted = ledger
            return ledger
        }
        return (harness, scripted!)
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

    private func lease(_ ledger: LocalAdmissionLedger, _ user: String) -> AdmissionDecision {
        ledger.admit(
            AdmissionRequest(
                user: user, bytesPerSecond: 0, family: .ipv4, transport: .udp, wallTime: 0,
                ticket: AdmissionTicket(loop: LoopIndex(0), serial: 0)))
    }

    @Test("A pending Allocate gets no answer until the decision comes; granted, it allocates and holds the lease")
    func pendingThenGranted() throws {
        let (harness, ledger) = harness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let (_, sent) = try signedAllocate(harness, client, at: CoreFixture.clientA)
        #expect(sent.isEmpty, "answered before the ledger did")
        let question = try #require(ledger.asked.first)
        #expect(question.user == "alice" && question.ticket.loop == LoopIndex(0) && question.family == .ipv4)
        #expect(harness.core.pendingAllocate(question.ticket) == harness.origin(CoreFixture.clientA).fiveTuple)
        let answer = try response(harness.resume(question.ticket, lease(ledger.local, "alice")), to: CoreFixture.clientA)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(harness.core.pendingAllocateCount == 0)
        #expect(harness.allocation(of: CoreFixture.clientA)?.lease.user == "alice")
        // The allocation's end gives the lease back.
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(ledger.local.total == 0)
    }

    @Test("Refused: the ledger's error; a redirect it names or alternate-server only when another node could serve")
    func refusals() throws {
        let cases: [(AdmissionRefusal, Int, TransportAddress?)] = [
            (.init(.userQuota), 486, nil),
            (.init(.clusterQuota), 508, nil),
            (.init(.blocked), 403, nil),
            (.init(.totalQuota, redirect: Self.otherNode), 300, Self.otherNode),
            (.init(.bandwidth), 300, .literal("203.0.113.9:3478")),
        ]
        for (refusal, code, redirect) in cases {
            let (harness, ledger) = harness { $0.settings.alternateServers = [.literal("203.0.113.9:3478")] }
            let client = harness.restClient(at: CoreFixture.clientA)
            _ = try signedAllocate(harness, client, at: CoreFixture.clientA)
            let ticket = try #require(ledger.asked.first?.ticket)
            let answer = try response(harness.resume(ticket, .refused(refusal)), to: CoreFixture.clientA)
            #expect(answer.errorCode == code, "\(refusal.reason): \(answer.description)")
            #expect(answer.decode(AlternateServer.self)?.address == redirect)
            #expect(harness.core.allocationCount == 0)
        }
    }

    @Test("A retransmission while pending is not asked again; after the patience it is, and the old ticket's lease goes back")
    func retransmissions() throws {
        let (harness, ledger) = harness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let (bytes, _) = try signedAllocate(harness, client, at: CoreFixture.clientA)
        #expect(harness.receive(bytes, from: CoreFixture.clientA).isEmpty)
        #expect(ledger.asked.count == 1)
        harness.advance(to: harness.now + 3)
        #expect(harness.receive(bytes, from: CoreFixture.clientA).isEmpty)
        #expect(ledger.asked.count == 2)
        let (first, second) = (ledger.asked[0].ticket, ledger.asked[1].ticket)
        #expect(first != second)
        // The first ticket's grant finds nothing held: its lease goes straight back.
        #expect(harness.resume(first, lease(ledger.local, "alice")).isEmpty)
        #expect(ledger.local.total == 0)
        let answer = try response(harness.resume(second, lease(ledger.local, "alice")), to: CoreFixture.clientA)
        let original = try ReceivedStun(bytes)
        #expect(answer.isSuccess && answer.transactionID == original.transactionID)
        // A late copy of the same grant: nothing more is allocated, the lease goes back.
        #expect(harness.resume(second, lease(ledger.local, "alice")).isEmpty)
        #expect(ledger.local.total == 1 && harness.core.allocationCount == 1)
    }

    @Test("A connection closed while its Allocate is pending: the grant allocates nothing and its lease goes back")
    func closedWhilePending() throws {
        let (harness, ledger) = harness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: .tcp)
        try client.challenge()
        let bytes = try client.signedRequest(.allocate) { w in try w.append(RequestedTransport.udp) }
        #expect(harness.receive(bytes, from: CoreFixture.clientA, transport: .tcp).isEmpty)
        let ticket = try #require(ledger.asked.first?.ticket)
        harness.core.connectionClosed(harness.origin(CoreFixture.clientA, transport: .tcp), now: harness.now)
        #expect(harness.core.pendingAllocate(ticket) == nil)
        #expect(harness.resume(ticket, lease(ledger.local, "alice")).isEmpty)
        #expect(harness.core.allocationCount == 0 && ledger.local.total == 0)
    }

    @Test("A live upgrade lets a UDP client's pending Allocate go: its grant allocates nothing here; a TCP client's stays")
    func handoverForgetsPendingUDP() throws {
        let (harness, ledger) = harness()
        let udp = harness.restClient(at: CoreFixture.clientA)
        _ = try signedAllocate(harness, udp, at: CoreFixture.clientA)
        let tcp = harness.restClient(at: CoreFixture.clientB, transport: .tcp)
        try tcp.challenge()
        let bytes = try tcp.signedRequest(.allocate) { w in try w.append(RequestedTransport.udp) }
        #expect(harness.receive(bytes, from: CoreFixture.clientB, transport: .tcp).isEmpty)
        #expect(ledger.asked.count == 2)
        let (udpTicket, tcpTicket) = (ledger.asked[0].ticket, ledger.asked[1].ticket)
        harness.core.forgetWaitingUDPRequests()
        #expect(harness.core.pendingAllocate(udpTicket) == nil)
        #expect(harness.core.pendingAllocate(tcpTicket) == harness.origin(CoreFixture.clientB, transport: .tcp).fiveTuple)
        // The grant that comes after the snapshot allocates nothing and answers nothing; its lease goes back.
        #expect(harness.resume(udpTicket, lease(ledger.local, "alice")).isEmpty)
        #expect(harness.core.allocationCount == 0 && ledger.local.total == 0)
        let answer = try response(harness.resume(tcpTicket, lease(ledger.local, "alice")), to: CoreFixture.clientB)
        #expect(answer.isSuccess, "\(answer.description)")
    }

    @Test("A granted Allocate that cannot open a relayed address gives its lease back (508)")
    func leaseBackWhenNoPort() throws {
        let (harness, ledger) = harness(holding: false) {
            $0.settings.minPort = 50001
            $0.settings.maxPort = 50001
        }
        #expect(try harness.restClient(at: CoreFixture.clientA).allocate().isSuccess)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "bob").allocate().errorCode == 508)
        #expect(ledger.local.total == 1 && ledger.local.count(user: "bob") == 0)
    }

    @Test("Draining: 300 to the node the ledger names, else alternate-server, else 508")
    func drainingRedirects() throws {
        for (alternate, servers, code, redirect) in [
            (Self.otherNode, [], 300, Self.otherNode),
            (nil, [TransportAddress.literal("203.0.113.9:3478")], 300, .literal("203.0.113.9:3478")),
            (nil, [], 508, nil),
        ] as [(TransportAddress?, [TransportAddress], Int, TransportAddress?)] {
            let (harness, ledger) = harness(holding: false, alternate: alternate) { $0.settings.alternateServers = servers }
            var context = harness.core.context
            context.draining = true
            harness.core.update(context: context)
            let answer = try harness.restClient(at: CoreFixture.clientA).allocate()
            #expect(answer.errorCode == code, "\(answer.description)")
            #expect(answer.decode(AlternateServer.self)?.address == redirect)
            #expect(ledger.asked.isEmpty, "a draining node asks no ledger")
        }
    }
}
