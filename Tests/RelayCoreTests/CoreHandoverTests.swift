import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A live upgrade's core side (docs/live-upgrade.md): the UDP clients' relay sockets are listed
/// for the heir, and once it serves, those allocations are let go (reason `handed_over`) while
/// stream clients' allocations stay.
@Suite struct CoreHandoverTests {
    @Test("Only UDP clients' relay sockets are handed over; releasing them ends exactly those")
    func handsOverUDPOnly() throws {
        let harness = CoreHarness()
        let udp = harness.restClient(at: CoreFixture.clientA, user: "udp")
        let tcp = harness.restClient(at: CoreFixture.clientB, user: "tcp", transport: .tcp)
        let relayed = try #require(try udp.allocate().xorRelayedAddress)
        #expect(try tcp.allocate().isSuccess)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        _ = harness.drainOutbox()

        let sockets = harness.core.udpRelaySockets()
        #expect(sockets.count == 1)
        #expect(sockets.first?.session == allocation.sessionID)
        #expect(sockets.first?.address == relayed)
        #expect(sockets.first?.additional == false)
        let deletedBefore = harness.counters.allocationsDeleted

        #expect(harness.core.releaseHandedOver(now: harness.now) == 1)
        _ = harness.drainOutbox()
        #expect(harness.core.allocationCount == 1)
        #expect(harness.allocation(of: CoreFixture.clientB, transport: .tcp) != nil)
        #expect(harness.sessions.map(\.reason) == [.handedOver])
        #expect(harness.sockets.closed == [sockets[0].socket])
        #expect(harness.admission.count(user: "udp") == 0)
        #expect(harness.admission.count(user: "tcp") == 1)
        #expect(!harness.core.tables.ports.isHeld(relayed.port, on: CoreFixture.relayIP, by: .udpAllocation))
        // Handed over is not deleted: the allocation goes on in the heir.
        #expect(harness.counters.allocationsDeleted == deletedBefore)
        #expect(harness.core.udpRelaySockets().isEmpty)
    }

    @Test("While a sibling process serves, every relay port counts as live; afterwards only held ones")
    func siblingPorts() {
        let pool = RelayPortPool(range: 50000...50009, addresses: [CoreFixture.relayIP], start: 0)
        #expect(!pool.isHeld(50003, on: CoreFixture.relayIP, by: .udpAllocation))
        pool.setSibling(true)
        #expect(pool.isHeld(50003, on: CoreFixture.relayIP, by: .udpAllocation))
        #expect(pool.isHeld(50003, on: CoreFixture.relayIP, by: .tcpAllocation))
        // Outside the range, or another address: never.
        #expect(!pool.isHeld(49999, on: CoreFixture.relayIP, by: .udpAllocation))
        #expect(!pool.isHeld(50003, on: CoreFixture.clientA.ip, by: .udpAllocation))
        pool.setSibling(false)
        #expect(!pool.isHeld(50003, on: CoreFixture.relayIP, by: .udpAllocation))
    }

    @Test("An EVEN-PORT reservation goes to the heir with its token, and an Allocate there takes it (RFC 8656 §7.2)")
    func reservationsGoOver() throws {
        let old = CoreHarness()
        let first = try old.restClient(at: CoreFixture.clientA).allocate { w in try w.append(EvenPort(reservePair: true)) }
        let port = try #require(first.xorRelayedAddress?.port)
        let token = try #require(first.reservationToken)
        let handed = old.core.liveReservations()
        #expect(handed.count == 1)
        let reservation = try #require(handed[token])
        #expect(reservation.address == TransportAddress(ip: CoreFixture.relayIP, port: port + 1))
        #expect(old.core.releaseHandedOver(now: old.now) == 1)
        #expect(old.core.relayPortsInUse == 0)

        let heir = CoreHarness()
        // Expired, or on an address that is not this node's: refused, nothing held.
        var stale = reservation
        stale.expiresAt = heir.now
        #expect(!heir.core.adoptReservation(token: token, stale, now: heir.now))
        var foreign = reservation
        foreign.address = TransportAddress(ip: CoreFixture.clientA.ip, port: port + 1)
        #expect(!heir.core.adoptReservation(token: token, foreign, now: heir.now))
        #expect(heir.core.relayPortsInUse == 0)
        // A lifetime longer than a reservation made here is cut to 30 s.
        var long = reservation
        long.expiresAt = heir.now + 3600
        #expect(heir.core.adoptReservation(token: token, long, now: heir.now))
        #expect(heir.core.liveReservations()[token]?.expiresAt == heir.now + 30)
        #expect(heir.core.relayPortsInUse == 1)

        let second = try heir.restClient(at: CoreFixture.clientB).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(second.xorRelayedAddress?.port == port + 1)
        #expect(heir.core.relayPortsInUse == 1)
        #expect(heir.core.liveReservations().isEmpty)
        // A port an allocation holds is not reserved again.
        #expect(!heir.core.adoptReservation(token: token &+ 1, reservation, now: heir.now))
    }

    @Test("A TCP or TLS client's allocation moves with its connection")
    func tcpClientsMove() throws {
        let old = CoreHarness()
        let tcp = old.restClient(at: CoreFixture.clientA, user: "tcp", transport: .tcp)
        let tls = old.restClient(at: CoreFixture.clientB, user: "tls", transport: .tls)
        let relayed = try #require(try tcp.allocate().xorRelayedAddress)
        #expect(try tls.allocate().isSuccess)
        let tcpTuple = try #require(old.allocation(of: CoreFixture.clientA, transport: .tcp)).origin.fiveTuple
        let tlsTuple = try #require(old.allocation(of: CoreFixture.clientB, transport: .tls)).origin.fiveTuple
        _ = old.drainOutbox()
        #expect(old.core.streamClientCanMove(tcpTuple))
        // The core lets a TLS client go; whether its session can is the connection's to say.
        #expect(old.core.streamClientCanMove(tlsTuple))
        #expect(old.core.udpRelaySockets().isEmpty, "stream clients' relay sockets go only with their connections")
        let (allocation, sockets) = try #require(old.core.streamAllocation(tcpTuple))
        #expect(allocation.fiveTuple == tcpTuple && allocation.main.address == relayed)
        #expect(sockets.map(\.address) == [relayed])
        // The snapshot carries it only when it is written for a live upgrade.
        #expect(throws: JournalEncodingError.self) {
            try JournalWriter.compacted(JournalState(allocations: [1: allocation]), bootID: BootID(high: 1, low: 2), now: old.now)
        }
        let snapshot = try JournalWriter.compacted(
            JournalState(allocations: [1: allocation]), bootID: BootID(high: 1, low: 2), now: old.now, streamClients: true)
        var bounds = JournalBounds()
        #expect(try JournalReader.read(snapshot, bootID: BootID(high: 1, low: 2), now: old.now, bounds: bounds).state.allocations.isEmpty)
        bounds.streamClients = true
        let read = try JournalReader.read(snapshot, bootID: BootID(high: 1, low: 2), now: old.now, bounds: bounds)
        #expect(read.state.allocations.values.first == allocation)

        old.core.releaseHandedOverStream(tcpTuple, now: old.now)
        _ = old.drainOutbox()
        #expect(old.allocation(of: CoreFixture.clientA, transport: .tcp) == nil)
        #expect(old.sessions.map(\.reason) == [.handedOver])
        #expect(old.allocation(of: CoreFixture.clientB, transport: .tls) != nil)

        let heir = CoreHarness()
        let socket = RelaySocket(descriptor: 901)
        heir.sockets.adopt(socket, bound: relayed)
        let origin = heir.origin(CoreFixture.clientA, transport: .tcp)
        try heir.core.adopt(allocation.adopted(listener: origin.socket, main: socket, additional: nil, now: heir.now), now: heir.now)
        #expect(heir.allocation(of: CoreFixture.clientA, transport: .tcp)?.relayedAddress == relayed)
        #expect(heir.admission.count(user: "tcp") == 1)

        // The TLS client's allocation goes the same way, through the snapshot.
        let (tlsAllocation, tlsSockets) = try #require(old.core.streamAllocation(tlsTuple))
        #expect(tlsAllocation.fiveTuple == tlsTuple && tlsSockets.count == 1)
        let tlsSnapshot = try JournalWriter.compacted(
            JournalState(allocations: [2: tlsAllocation]), bootID: BootID(high: 1, low: 2), now: old.now, streamClients: true)
        let tlsRead = try JournalReader.read(tlsSnapshot, bootID: BootID(high: 1, low: 2), now: old.now, bounds: bounds)
        let carried = try #require(tlsRead.state.allocations.values.first)
        #expect(carried == tlsAllocation)
        let tlsSocket = RelaySocket(descriptor: 902)
        heir.sockets.adopt(tlsSocket, bound: carried.main.address)
        let tlsOrigin = heir.origin(CoreFixture.clientB, transport: .tls)
        try heir.core.adopt(carried.adopted(listener: tlsOrigin.socket, main: tlsSocket, additional: nil, now: heir.now), now: heir.now)
        #expect(heir.allocation(of: CoreFixture.clientB, transport: .tls)?.relayedAddress == carried.main.address)
        #expect(heir.admission.count(user: "tls") == 1)
    }
}
