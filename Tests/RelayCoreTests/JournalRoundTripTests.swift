import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The state journal written and read back whole (docs/state-journal.md): a compacted state,
/// an appended sequence of records, the conversions to and from `AdoptedAllocation`.
@Suite struct JournalRoundTripTests {
    typealias F = JournalFixture

    @Test("A compacted rich state reads back equal: dual allocation, permissions, channels, keys, a reservation")
    func compactedRoundTrip() throws {
        let state = JournalState(
            allocations: [0x1111: F.dual(), 0x2222: F.plain()], keys: F.keys, reservations: [7: F.reservation()])
        let journal = try JournalWriter.compacted(state, bootID: F.boot, now: F.written)
        let recovery = try F.read(journal)
        #expect(recovery.state == state)
        #expect(recovery.records == 4)
        #expect(recovery.tail == nil)
        #expect(recovery.validBytes == journal.count)
        #expect(recovery.drops.isEmpty)
        // Compacting what was read gives the same bytes: the order is the ids', not a hash's.
        #expect(try JournalWriter.compacted(recovery.state, bootID: F.boot, now: F.written) == journal)
    }

    @Test("Appended records leave the final state: upserts replace, ends remove, keys replace the keys")
    func appendedSequence() throws {
        let (journal, ends) = try F.scriptJournal()
        let recovery = try F.read(journal)
        let expected = F.state(afterRecords: F.script.count)
        #expect(recovery.state == expected)
        #expect(Set(expected.allocations.keys) == [0x1111, 0x3333])
        #expect(expected.allocations[0x1111]?.moves == 2)
        #expect(expected.reservations.isEmpty)
        #expect(expected.keys == [JournalKey(name: "nonce", bytes: [9])])
        #expect(recovery.records == F.script.count)
        #expect(recovery.validBytes == ends.last)
        #expect(recovery.drops.isEmpty)
    }

    @Test("A header alone is an empty state; the header is 30 bytes")
    func headerOnly() throws {
        let header = JournalWriter.header(bootID: F.boot)
        #expect(header.count == JournalFormat.headerBytes)
        #expect(Array(header.prefix(8)) == JournalFormat.magic)
        let recovery = try F.read(header)
        #expect(recovery == JournalRecovery(validBytes: 30))
    }

    @Test("docs/state-journal.md's example: an IPv4 allocation with one permission and channel is 271 bytes framed")
    func documentedSize() throws {
        let allocation = JournalAllocation(
            sessionID: 1,
            fiveTuple: FiveTuple(client: CoreFixture.clientA, server: CoreFixture.server, transport: .udp),
            main: .init(address: .literal("10.0.0.5:50001"), expiresAt: F.now), username: "0123456789abcdef",
            user: "0123456789abcdef", key: Array(repeating: 1, count: 16),
            transactionID: TransactionID(high: 1, low: 1),
            allocateResponse: Array(repeating: 0, count: 100),
            permissions: [.init(peer: .literal("1.2.3.4"), expiresAt: F.now)],
            channels: [.init(number: 0x4000, peer: .literal("1.2.3.4:5000"), expiresAt: F.now)])
        #expect(try JournalWriter.frame(.allocation(allocation), now: F.written).count == 271)
    }

    @Test("An adopted allocation journaled and read back adopts with the seconds it had left")
    func adoptedConversion() throws {
        let adopted = AdoptedAllocation(
            origin: ClientOrigin(
                fiveTuple: FiveTuple(client: CoreFixture.clientA, server: CoreFixture.server, transport: .udp),
                socket: ClientSocket(descriptor: 3)),
            main: .init(bound: .literal("10.0.0.5:50004"), socket: RelaySocket(descriptor: 40), secondsLeft: 500),
            username: "u", user: "u", key: Array(repeating: 1, count: 16),
            transactionID: TransactionID(high: 3, low: 4),
            permissions: [(.literal("1.2.3.4"), 200)], channels: [(0x4001, .literal("1.2.3.4:5000"), 400)],
            sessionID: 42)
        let journal = try JournalWriter.compacted(
            JournalState(allocations: [42: JournalAllocation(adopted, now: F.written)]), bootID: F.boot, now: F.written)
        let read = try #require(try F.read(journal).state.allocations[42])
        // 10 s later, each lifetime has 10 s less.
        let again = read.adopted(
            listener: ClientSocket(descriptor: 5), main: RelaySocket(descriptor: 41), additional: nil, now: F.now)
        #expect(again.origin.fiveTuple == adopted.origin.fiveTuple)
        #expect(again.origin.socket == ClientSocket(descriptor: 5))
        #expect(again.main.bound == adopted.main.bound && again.main.socket == RelaySocket(descriptor: 41))
        #expect(again.main.secondsLeft == 490)
        #expect(again.permissions.map(\.secondsLeft) == [190])
        #expect(again.channels.map(\.number) == [0x4001] && again.channels.map(\.secondsLeft) == [390])
        #expect(again.sessionID == 42 && again.key == adopted.key && again.transactionID == adopted.transactionID)
    }

    @Test("Read back, an allocation is adopted by a core and relays on its channel again")
    func adoptedByCore() throws {
        let harness = CoreHarness()
        let relayed = TransportAddress(ip: CoreFixture.relayIP, port: 50005)
        var allocation = F.plain(77)
        allocation.fiveTuple = FiveTuple(client: CoreFixture.clientA, server: CoreFixture.server, transport: .udp)
        allocation.main = .init(address: relayed, expiresAt: harness.now + 300)
        allocation.permissions = [.init(peer: CoreFixture.peer1.ip, expiresAt: harness.now + 200)]
        allocation.channels = [.init(number: 0x4000, peer: CoreFixture.peer1, expiresAt: harness.now + 400)]
        let journal = try JournalWriter.compacted(
            JournalState(allocations: [77: allocation]), bootID: F.boot, now: harness.now)
        let read = try #require(
            try JournalReader.read(journal, bootID: F.boot, now: harness.now, bounds: F.bounds).state.allocations[77])
        let socket = RelaySocket(descriptor: 900)
        harness.sockets.adopt(socket, bound: relayed)
        let listener = harness.origin(CoreFixture.clientA).socket
        try harness.core.adopt(
            read.adopted(listener: listener, main: socket, additional: nil, now: harness.now), now: harness.now)
        _ = harness.drainOutbox()
        #expect(harness.core.allocationCount == 1)
        let toClient = harness.receiveFromPeer([1, 2, 3], from: CoreFixture.peer1, at: socket)
        #expect(toClient.first.map { Array($0.bytes.prefix(2)) } == [0x40, 0x00])
    }

    @Test("The boot id parses from /proc/sys/kernel/random/boot_id's text, and nothing else")
    func bootIDText() {
        let id = BootID(text: "01234567-89ab-cdef-FEDC-ba9876543210\n")
        #expect(id == F.boot)
        #expect(
            id?.bytes == [
                0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10,
            ])
        #expect(BootID(bytes: F.boot.bytes) == F.boot)
        for bad in [
            "", "0123456789abcdeffedcba9876543210", "01234567-89ab-cdef-fedc-ba987654321g",
            "01234567-89ab-cdef-fedc+ba9876543210",
        ] {
            #expect(BootID(text: bad) == nil, "\(bad)")
        }
        #expect(BootID(bytes: [1, 2, 3]) == nil)
    }
}
