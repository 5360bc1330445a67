import StunCodec
import Testing

@testable import CoreTestSupport
@testable import RelayCore

/// The mobility machine on its own (RFC 8016): its decisions, without a `RelayCore`.
@Suite struct MobilityTests {
    static let session: UInt64 = 0x0123_4567_89AB_CDEF

    @Test(
        "MOBILITY-TICKET on Allocate: absent, asked for, not empty (400), over TCP or turned off (405) (RFC 8016 §3.1.2)"
    )
    func requested() {
        #expect(Mobility.requested(ticketLength: nil, enabled: true, transport: .udp) == .success(false))
        #expect(Mobility.requested(ticketLength: nil, enabled: false, transport: .tcp) == .success(false))
        #expect(Mobility.requested(ticketLength: 0, enabled: true, transport: .udp) == .success(true))
        #expect(Mobility.requested(ticketLength: 4, enabled: true, transport: .udp) == .failure(.badRequest))
        #expect(Mobility.requested(ticketLength: 0, enabled: true, transport: .tcp) == .failure(.mobilityForbidden))
        #expect(Mobility.requested(ticketLength: 0, enabled: true, transport: .tls) == .failure(.mobilityForbidden))
        #expect(Mobility.requested(ticketLength: 0, enabled: false, transport: .udp) == .failure(.mobilityForbidden))
    }

    @Test("Nonces never repeat: the thread's index in byte 0, its count of sealed tickets in bytes 4-11")
    func nonces() {
        var mobility = Mobility()
        var seen = Set<[UInt8]>()
        for _ in 0..<1000 { seen.insert(mobility.nonce(thread: 3)) }
        #expect(seen.count == 1000 && mobility.ticketsSealed == 1000)
        #expect(seen.allSatisfy { $0.count == SealedBox.nonceLength && $0[0] == 3 && $0[1..<4] == [0, 0, 0] })
        var fresh = Mobility()
        let first = fresh.nonce(thread: 3)
        #expect(first == [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
        // Another thread's first nonce is not this thread's first.
        var other = Mobility()
        #expect(other.nonce(thread: 4) != first)
        // The count runs on over a byte boundary without repeating.
        var long = Mobility()
        let nonces = (0..<300).map { _ in long.nonce(thread: 0) }
        #expect(Set(nonces).count == 300 && nonces[255][10...] == [1, 0])
    }

    @Test("A ticket opens to its session and the serial it was sealed with; two of one serial differ")
    func tickets() throws {
        let keys = MobilityTickets(key: [UInt8](repeating: 7, count: SealedBox.keyLength))
        var mobility = Mobility()
        let sealed = [0, 0, 5].map { mobility.ticket(session: Self.session, serial: $0, thread: 1, keys: keys)?.bytes }
        let first = try #require(sealed[0])
        let again = try #require(sealed[1])
        let moved = try #require(sealed[2])
        #expect(first.count == MobilityTickets.length && first != again)
        let opened = [first, again, moved].map { ticket in ticket.withUnsafeBytes { keys.open($0) } }
        #expect(opened.map { $0?.session } == [Self.session, Self.session, Self.session])
        #expect(opened.map { $0?.serial } == [0, 0, 5])
        #expect(mobility.ticketsSealed == 3)
        // Another process's key cannot read it.
        let foreign = MobilityTickets(key: [UInt8](repeating: 8, count: SealedBox.keyLength))
        #expect(first.withUnsafeBytes { foreign.open($0) } == nil)
    }

    @Test("A Refresh with a ticket from an unknown 5-tuple: refused, handed over, or moved here (RFC 8016 §3.2.2)")
    func route() {
        let opened = (session: Self.session, serial: UInt32(2))
        func route(
            _ opened: (session: UInt64, serial: UInt32)?, owner: Int?, enabled: Bool = true,
            transport: TransportProtocol = .udp
        ) -> MobileRefreshRoute {
            Mobility.route(opened: opened, owner: owner, enabled: enabled, thread: 1, transport: transport)
        }
        // Mobility off: the ticket is not even opened.
        #expect(
            route(nil, owner: nil, enabled: false)
                == .refuse(MobilityRefusal(error: .mobilityForbidden, counted: .refused)))
        #expect(route(nil, owner: nil) == .refuse(MobilityRefusal(error: .badRequest, counted: .refused)))
        #expect(route(opened, owner: nil) == .refuse(MobilityRefusal(error: .allocationMismatch, counted: .refused)))
        #expect(route(opened, owner: 2) == .forward(LoopIndex(2)))
        #expect(
            route(opened, owner: 2, transport: .tcp)
                == .refuse(MobilityRefusal(error: .mobilityForbidden, counted: nil)))
        #expect(route(opened, owner: 1) == .local(session: Self.session, serial: 2))
    }

    @Test("A move needs the current serial (400, counted), UDP (405), a free 5-tuple (437) and a family it has (443)")
    func refusal() {
        func refusal(serial: UInt32 = 3, transport: TransportProtocol = .udp, free: Bool = true, serves: Bool = true)
            -> MobilityRefusal?
        {
            Mobility.refusal(
                serial: serial, moves: 3, transport: transport, destinationFree: free, servesFamily: serves)
        }
        #expect(refusal() == nil)
        #expect(refusal(serial: 2) == MobilityRefusal(error: .badRequest, counted: .refused))
        #expect(refusal(serial: 4) == MobilityRefusal(error: .badRequest, counted: .refused))
        #expect(refusal(transport: .tls) == MobilityRefusal(error: .mobilityForbidden, counted: nil))
        #expect(refusal(free: false) == MobilityRefusal(error: .allocationMismatch, counted: nil))
        #expect(refusal(serves: false) == MobilityRefusal(error: .peerAddressFamilyMismatch, counted: nil))
        // The first failing check answers.
        #expect(refusal(serial: 0, transport: .tcp, free: false, serves: false)?.error == .badRequest)
    }

    @Test("A moved client is answered from this thread's listener on its server address, and has a socket of its own")
    func movedOrigin() {
        let server = CoreFixture.server
        let other = TransportAddress.literal("192.0.2.99:3478")
        let listeners = [
            (address: other, socket: ClientSocket(descriptor: 5)),
            (address: server, socket: ClientSocket(descriptor: 6)),
        ]
        let tuple = FiveTuple(client: CoreFixture.clientA, server: server, transport: .udp)
        let steered = ClientOrigin(fiveTuple: tuple, socket: ClientSocket(descriptor: 40))
        #expect(
            Mobility.movedOrigin(steered, listeners: listeners)
                == ClientOrigin(fiveTuple: tuple, socket: ClientSocket(descriptor: 6)))
        #expect(Mobility.movedOrigin(steered, listeners: []) == steered)
        #expect(!Mobility.hasSteeredSocket(moves: 0) && Mobility.hasSteeredSocket(moves: 1))
    }
}

/// A live upgrade hands the mobility keys on (docs/live-upgrade.md): tickets sealed before open
/// after, in the new process's `MobilityTickets`.
@Suite struct MobilityKeyHandoverTests {
    @Test("Tickets under the current and the previous key open after the keys are adopted")
    func keysMove() throws {
        let old = MobilityTickets()
        let earlier = try #require(old.seal(session: 7, serial: 1, nonce: Array(repeating: 1, count: 12)))
        old.rotate()
        let ticket = try #require(old.seal(session: 9, serial: 2, nonce: Array(repeating: 2, count: 12)))
        let heir = MobilityTickets()
        #expect(ticket.withUnsafeBytes { heir.open($0) } == nil)
        heir.adopt(old.exportedKeys())
        #expect(ticket.withUnsafeBytes { heir.open($0) }.map { [$0.session, UInt64($0.serial)] } == [9, 2])
        #expect(earlier.withUnsafeBytes { heir.open($0) }.map { [$0.session, UInt64($0.serial)] } == [7, 1])
        // Damaged keys change nothing.
        let other = MobilityTickets()
        other.adopt([JournalKey(name: MobilityTickets.currentKeyName, bytes: [1, 2, 3])])
        #expect(ticket.withUnsafeBytes { other.open($0) } == nil)
    }
}
