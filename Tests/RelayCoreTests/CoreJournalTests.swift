import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// What the core hands the state journal (docs/state-journal.md): each UDP allocation whole when
/// it changes, an end record when it ends, nothing for stream clients; and what it hands back
/// restores the allocation in another core.
@Suite struct CoreJournalTests {
    static func records(_ harness: CoreHarness) -> [JournalRecord] {
        var records: [JournalRecord] = []
        harness.core.takeJournalRecords(into: &records)
        return records
    }

    @Test("An allocation is journaled whole after each change, and its end after it ends")
    func changesAndEnd() throws {
        let harness = CoreHarness()
        harness.core.journaling = true
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        let first = Self.records(harness)
        guard case .allocation(let written)? = first.first, first.count == 1 else {
            Issue.record("expected one allocation record, got \(first)")
            return
        }
        #expect(written.main.address == relayed)
        #expect(written.fiveTuple == harness.origin(CoreFixture.clientA).fiveTuple)
        #expect(written.permissions.map(\.peer) == [CoreFixture.peer1.ip])
        #expect(written.channels.map(\.number) == [0x4001])
        #expect(written.key == client.key && written.user == "alice")
        #expect(written.main.expiresAt == harness.now + 600)
        #expect(Self.records(harness).isEmpty)

        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(Self.records(harness) == [.allocationEnded(sessionID: written.sessionID)])
        #expect(!harness.core.hasJournalChanges)
    }

    @Test("Off, nothing is noted; a stream client's allocation is never journaled")
    func offAndStreams() throws {
        let off = CoreHarness()
        #expect(try off.restClient(at: CoreFixture.clientA).allocate().isSuccess)
        #expect(!off.core.hasJournalChanges)

        let harness = CoreHarness()
        harness.core.journaling = true
        let tcp = harness.restClient(at: CoreFixture.clientB, transport: .tcp)
        #expect(try tcp.allocate().isSuccess)
        #expect(!harness.core.hasJournalChanges)
        #expect(harness.core.journalAllocations().isEmpty)
    }

    @Test("A journaled allocation, written and read back, is adopted by a fresh core and relays on its channel")
    func restoredElsewhere() throws {
        let first = CoreHarness()
        first.core.journaling = true
        let client = first.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        #expect(try client.channelBind(0x4002, to: CoreFixture.peer2).isSuccess)
        var journal = JournalWriter.header(bootID: JournalFixture.boot)
        var records: [JournalRecord] = []
        first.core.takeJournalRecords(into: &records)
        for record in records { try JournalWriter.append(record, now: first.now, to: &journal) }

        let recovery = try JournalReader.read(
            journal, bootID: JournalFixture.boot, now: first.now + 5, bounds: JournalBounds(settings: .defaults))
        let restored = try #require(recovery.state.allocations.values.first)
        let second = CoreHarness(now: first.now + 5)
        let socket = RelaySocket(descriptor: 500)
        second.sockets.adopt(socket, bound: relayed)
        try second.core.adopt(
            restored.adopted(listener: second.listenerSocket, main: socket, additional: nil, now: second.now),
            now: second.now)
        _ = second.drainOutbox()
        let frame = try #require(second.receiveFromPeer([7, 7], from: CoreFixture.peer2, at: socket).first)
        #expect(frame.client == CoreFixture.clientA)
        #expect(Array(frame.bytes.prefix(2)) == [0x40, 0x02])
        #expect(second.core.allocation(for: second.origin(CoreFixture.clientA).fiveTuple)?.expiry == first.now + 600)
    }

    @Test("An EVEN-PORT reservation is journaled when made and when an Allocate takes it (RFC 8656 §7.2)")
    func reservations() throws {
        let harness = CoreHarness()
        harness.core.journaling = true
        let first = try harness.restClient(at: CoreFixture.clientA).allocate { w in try w.append(EvenPort(reservePair: true)) }
        let port = try #require(first.xorRelayedAddress?.port)
        let token = try #require(first.reservationToken)
        let made = Self.records(harness)
        #expect(made.count == 2)
        #expect(
            made.first
                == .reservation(
                    token: token,
                    JournalReservation(
                        address: TransportAddress(ip: CoreFixture.relayIP, port: port + 1), expiresAt: harness.now + 30)))
        #expect(harness.core.liveReservations().keys.sorted() == [token])

        let second = try harness.restClient(at: CoreFixture.clientB).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(second.xorRelayedAddress?.port == port + 1)
        let taken = Self.records(harness)
        #expect(taken.first == .reservationEnded(token: token))
        #expect(taken.count == 2, "the end, then the second allocation")
        #expect(harness.core.liveReservations().isEmpty)
    }
}
