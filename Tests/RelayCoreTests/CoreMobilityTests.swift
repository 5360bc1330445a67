import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Mobility (RFC 8016): a ticket on Allocate, and a Refresh with it from a new 5-tuple moves the
/// allocation, keeping its relayed address, permissions and channels (docs/mobility.md).
@Suite struct CoreMobilityTests {
    static let newClient = TransportAddress.literal("198.51.100.20:50123")

    private static func askMobility(_ w: inout StunMessageWriter) throws { try w.append(MobilityTicket(bytes: [])) }

    /// A mobile allocation with a permission and channel 0x4001 to peer1: the harness, the client,
    /// its relay socket and ticket.
    private func mobile(_ harness: CoreHarness = CoreHarness()) throws -> (CoreHarness, TurnTestClient, RelaySocket, [UInt8]) {
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate(Self.askMobility)
        #expect(answer.isSuccess, "\(answer.description)")
        let ticket = try #require(answer.decode(MobilityTicket.self)).bytes
        #expect(ticket.count == MobilityTickets.length)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        let relayed = try #require(answer.xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)), ticket)
    }

    private func move(_ client: TurnTestClient, ticket: [UInt8], lifetime: UInt32 = 600) throws -> ReceivedStun {
        try client.request(.refresh) { w in
            try w.append(Lifetime(seconds: lifetime))
            try w.append(MobilityTicket(bytes: ticket))
        }
    }

    @Test("A Refresh with the ticket from a new 5-tuple moves the allocation: same relayed address, permission and channel")
    func moves() throws {
        let (harness, _, socket, ticket) = try mobile()
        let moved = harness.restClient(at: Self.newClient)
        let answer = try move(moved, ticket: ticket)
        #expect(answer.isSuccess, "\(answer.description)")
        let next = try #require(answer.decode(MobilityTicket.self)).bytes
        #expect(next != ticket && next.count == MobilityTickets.length)
        #expect(harness.allocation(of: CoreFixture.clientA) == nil)
        let allocation = try #require(harness.allocation(of: Self.newClient))
        #expect(allocation.relaySocket == socket && allocation.moves == 1)
        #expect(harness.steering.last == .init(from: harness.origin(CoreFixture.clientA).fiveTuple, to: harness.origin(Self.newClient).fiveTuple))
        // The channel relays from the new 5-tuple, and the peer's data goes there.
        let sent = harness.receive(StunTestMessages.channelData(0x4001, [1, 2, 3]), from: Self.newClient)
        #expect(sent.first?.peer?.relaySocket == socket && sent.first?.bytes == [1, 2, 3])
        let back = harness.receiveFromPeer([7], from: CoreFixture.peer1, at: socket)
        #expect(back.first?.client == Self.newClient)
        // The old 5-tuple has nothing any more.
        #expect(harness.receive(StunTestMessages.channelData(0x4001, [4]), from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.mobility[MobilityOutcome.moved.rawValue] == 1)
        // The channel's route was withdrawn for the old client and installed for the new one.
        let routes = harness.channelCommands
        #expect(routes.contains { if case .remove(let r) = $0 { r.client == CoreFixture.clientA } else { false } })
        #expect(routes.contains { if case .install(let r) = $0 { r.client == Self.newClient } else { false } })
    }

    @Test("A used ticket cannot move the allocation again (400); the new one can")
    func usedTicket() throws {
        let (harness, _, _, ticket) = try mobile()
        let first = try move(harness.restClient(at: Self.newClient), ticket: ticket)
        let next = try #require(first.decode(MobilityTicket.self)).bytes
        let third = TransportAddress.literal("198.51.100.30:40000")
        #expect(try move(harness.restClient(at: third), ticket: ticket).errorCode == 400)
        #expect(harness.allocation(of: Self.newClient) != nil)
        #expect(try move(harness.restClient(at: third), ticket: next).isSuccess)
        #expect(harness.allocation(of: third)?.moves == 2)
    }

    @Test("A stolen ticket with another user's credentials gets 441, and moves nothing")
    func stolenTicket() throws {
        let (harness, _, _, ticket) = try mobile()
        let thief = harness.restClient(at: Self.newClient, user: "mallory")
        #expect(try move(thief, ticket: ticket).errorCode == 441)
        #expect(harness.allocation(of: CoreFixture.clientA) != nil)
        #expect(harness.allocation(of: Self.newClient) == nil)
    }

    @Test("A forged or altered ticket gets 400 after authentication; without credentials, 401")
    func forgedTicket() throws {
        let (harness, _, _, ticket) = try mobile()
        var altered = ticket
        altered[5] ^= 0x01
        let client = harness.restClient(at: Self.newClient)
        #expect(try move(client, ticket: altered).errorCode == 400)
        #expect(try move(client, ticket: Array(repeating: 7, count: 41)).errorCode == 400)
        let unsigned = try StunTestMessages.request(.refresh) { w in try w.append(MobilityTicket(bytes: ticket)) }
        #expect(try harness.restClient(at: TransportAddress.literal("198.51.100.40:1")).send(unsigned)?.errorCode == 401)
        #expect(harness.counters.mobility[MobilityOutcome.refused.rawValue] == 2)
    }

    @Test("Allocate: a non-empty ticket is 400; mobility turned off, or a TCP client, is 405")
    func allocateChecks() throws {
        let harness = CoreHarness()
        #expect(try harness.restClient(at: CoreFixture.clientA).allocate { w in try w.append(MobilityTicket(bytes: [1])) }.errorCode == 400)
        let off = CoreHarness(options: CoreFixture.options { $0.settings.mobility = false })
        #expect(try off.restClient(at: CoreFixture.clientA).allocate(Self.askMobility).errorCode == 405)
        let tcp = harness.restClient(at: CoreFixture.clientB, transport: .tcp)
        #expect(try tcp.allocate(Self.askMobility).errorCode == 405)
        #expect(harness.sockets.bound.isEmpty)
    }

    @Test("The ticket of an allocation that ended gets 437")
    func endedAllocation() throws {
        let (harness, client, _, ticket) = try mobile()
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(try move(harness.restClient(at: Self.newClient), ticket: ticket).errorCode == 437)
    }

    @Test("Without the ticket attribute an allocation is not mobile and its answers carry none")
    func notMobile() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate()
        #expect(answer.decode(MobilityTicket.self) == nil)
        #expect(harness.allocation(of: CoreFixture.clientA)?.mobile == false)
    }

    @Test("The retransmitted move from the new 5-tuple gets success and the current ticket again")
    func retransmission() throws {
        let (harness, _, _, ticket) = try mobile()
        let moved = harness.restClient(at: Self.newClient)
        let next = try #require(try move(moved, ticket: ticket).decode(MobilityTicket.self)).bytes
        let again = try move(moved, ticket: ticket)
        #expect(again.isSuccess)
        let current = try #require(again.decode(MobilityTicket.self)).bytes
        #expect(current.count == next.count)
        #expect(harness.allocation(of: Self.newClient)?.moves == 1)
    }

    @Test("A ticket issued before one key rotation still moves the allocation; before two, it is 400")
    func keyRotation() throws {
        let tickets = MobilityTickets()
        let directory = RelayedAddressDirectory()
        let admission = LocalAdmissionLedger()
        let placement = CoreHarness.LoopPlacement(index: 0, count: 1, admission: admission, directory: directory, mobility: tickets)
        let (harness, _, _, ticket) = try mobile(CoreHarness(loop: placement))
        tickets.rotate()
        let answer = try move(harness.restClient(at: Self.newClient), ticket: ticket)
        #expect(answer.isSuccess)
        let next = try #require(answer.decode(MobilityTicket.self)).bytes
        tickets.rotate()
        tickets.rotate()
        #expect(try move(harness.restClient(at: .literal("198.51.100.50:2")), ticket: next).errorCode == 400)
    }

    @Test("A ticket that reaches another loop thread is forwarded to the one holding the allocation, which moves it")
    func acrossLoops() throws {
        let tickets = MobilityTickets()
        let directory = RelayedAddressDirectory()
        let admission = LocalAdmissionLedger()
        let ports = CoreFixture.portPool()
        func placement(_ index: Int) -> CoreHarness.LoopPlacement {
            .init(index: index, count: 2, admission: admission, directory: directory, mobility: tickets, ports: ports)
        }
        let (owner, _, socket, ticket) = try mobile(CoreHarness(loop: placement(0)))
        let other = CoreHarness(loop: placement(1))
        let client = other.restClient(at: Self.newClient)
        // The other loop hands the Refresh over instead of answering it.
        let signed = try StunTestMessages.request(.refresh) { w in
            try w.append(Lifetime(seconds: 600))
            try w.append(MobilityTicket(bytes: ticket))
        }
        #expect(try client.send(signed) == nil)
        let request = try #require(other.forwarded.last)
        #expect(request.thread == LoopIndex(0) && request.origin.fiveTuple.client == Self.newClient)
        #expect(other.counters.mobility[MobilityOutcome.forwarded.rawValue] == 1)
        // The owner answers it (401 first: it carried no credentials) from its own listener.
        owner.core.handleForwardedRequest(request.bytes, from: request.origin, now: owner.now)
        let answer = try ReceivedStun(try #require(owner.drainOutbox().first).bytes)
        #expect(answer.errorCode == 401)
        #expect(owner.allocation(of: CoreFixture.clientA)?.relaySocket == socket)
    }

    @Test("A move naming a family the allocation does not have is 443, and nothing moves")
    func moveWithWrongFamily() throws {
        let (harness, _, _, ticket) = try mobile()
        let answer = try harness.restClient(at: Self.newClient).request(.refresh) { w in
            try w.append(Lifetime(seconds: 600))
            try w.append(MobilityTicket(bytes: ticket))
            try w.append(RequestedAddressFamily(family: .ipv6))
        }
        #expect(answer.errorCode == 443)
        #expect(harness.allocation(of: CoreFixture.clientA) != nil && harness.allocation(of: Self.newClient) == nil)
    }

    @Test("Every Refresh answer of a mobile allocation carries a fresh ticket; a plain allocation's none")
    func refreshCarriesTicket() throws {
        let (harness, client, _, ticket) = try mobile()
        let refreshed = try client.refresh(lifetime: 600)
        let fresh = try #require(refreshed.decode(MobilityTicket.self)).bytes
        #expect(fresh != ticket)
        // Both open: the fresh one moves the allocation.
        #expect(try move(harness.restClient(at: Self.newClient), ticket: fresh).isSuccess)
    }

    @Test("A TCP client presenting another loop's ticket gets 405 where it is; nothing is forwarded")
    func streamClientIsNotForwarded() throws {
        let tickets = MobilityTickets()
        let admission = LocalAdmissionLedger()
        let directory = RelayedAddressDirectory()
        let ports = CoreFixture.portPool()
        func placement(_ index: Int) -> CoreHarness.LoopPlacement {
            .init(index: index, count: 2, admission: admission, directory: directory, mobility: tickets, ports: ports)
        }
        let (_, _, _, ticket) = try mobile(CoreHarness(loop: placement(0)))
        let other = CoreHarness(loop: placement(1))
        let answer = try move(other.restClient(at: Self.newClient, transport: .tcp), ticket: ticket)
        #expect(answer.errorCode == 405)
        #expect(other.forwarded.isEmpty)
    }
}
