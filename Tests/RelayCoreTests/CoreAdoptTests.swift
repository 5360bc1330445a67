import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Adopting a UDP allocation whose relay socket is open already (a handover from another
/// process, or a restore; docs/architecture.md, "Relay sockets"): served on as if this core had
/// made it, with its port held, its lease counted and its channels routed again.
@Suite struct CoreAdoptTests {
    static let socket = RelaySocket(descriptor: 900)
    static let relayed = TransportAddress(ip: CoreFixture.relayIP, port: 50005)

    /// A harness, a client that knows the realm and nonce, and the allocation it held elsewhere:
    /// a permission for peer1's IP and channel 0x4000 to peer1.
    static func adopted(_ harness: CoreHarness, client: TurnTestClient) -> AdoptedAllocation {
        AdoptedAllocation(
            origin: harness.origin(CoreFixture.clientA),
            main: .init(bound: relayed, socket: socket, secondsLeft: 300), username: client.username, user: "alice",
            key: client.key, transactionID: .random(), permissions: [(CoreFixture.peer1.ip, 200)],
            channels: [(0x4000, CoreFixture.peer1, 400)], sessionID: 0x1234)
    }

    static func setUp() throws -> (CoreHarness, TurnTestClient) {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        harness.sockets.adopt(socket, bound: relayed)
        return (harness, client)
    }

    @Test("An adopted allocation relays on its channel, refreshes with its key, and holds its port and lease")
    func servedOn() throws {
        let (harness, client) = try Self.setUp()
        try harness.core.adopt(Self.adopted(harness, client: client), now: harness.now)
        _ = harness.drainOutbox()
        #expect(harness.core.allocationCount == 1)
        #expect(harness.started == 1)
        #expect(harness.admission.count(user: "alice") == 1)
        #expect(harness.core.tables.ports.isHeld(50005, on: CoreFixture.relayIP, by: .udpAllocation))
        // The channel's route is announced again, for the kernel fast path.
        let routes = harness.channelCommands.compactMap { command -> ChannelRoute? in
            if case .install(let route) = command { return route }
            return nil
        }
        #expect(routes.map(\.number) == [0x4000])
        #expect(routes.first?.relaySocket == Self.socket)
        // The peer's datagram reaches the client as ChannelData on 0x4000 (RFC 8656 §12.6).
        let toClient = harness.receiveFromPeer([1, 2, 3], from: CoreFixture.peer1, at: Self.socket)
        let frame = try #require(toClient.first)
        #expect(frame.client == CoreFixture.clientA)
        #expect(Array(frame.bytes.prefix(2)) == [0x40, 0x00])
        // Its key still signs: a Refresh succeeds.
        #expect(try client.refresh(lifetime: 600).isSuccess)
        // Its port is not handed out again: the other nine go to new clients, the tenth gets 508.
        for i in 0..<9 {
            let other = harness.restClient(at: TransportAddress(ip: CoreFixture.clientB.ip, port: UInt16(42000 + i)))
            #expect(try other.allocate().xorRelayedAddress?.port != 50005)
        }
        let last = harness.restClient(at: TransportAddress(ip: CoreFixture.clientB.ip, port: 42100))
        #expect(try last.allocate().errorCode == 508)
    }

    @Test("When its lifetime runs out the adopted socket closes, its port and lease go back")
    func expires() throws {
        let (harness, client) = try Self.setUp()
        try harness.core.adopt(Self.adopted(harness, client: client), now: harness.now)
        _ = harness.drainOutbox()
        harness.advance(by: 301)
        harness.sweep()
        #expect(harness.core.allocationCount == 0)
        #expect(harness.sockets.closed == [Self.socket])
        #expect(harness.core.relayPortsInUse == 0)
        #expect(harness.admission.total == 0)
        #expect(harness.sessions.count == 1)
    }

    @Test("Refused, changing nothing: a held port, a port outside the pool, a taken 5-tuple, a stream client, no time left")
    func refusals() throws {
        let (harness, client) = try Self.setUp()
        let adopted = Self.adopted(harness, client: client)
        try harness.core.adopt(adopted, now: harness.now)
        _ = harness.drainOutbox()

        var samePort = adopted
        samePort.origin = harness.origin(CoreFixture.clientB)
        #expect(throws: AdoptionRefusal.portUnavailable(Self.relayed)) { try harness.core.adopt(samePort, now: harness.now) }
        var outside = samePort
        outside.main.bound = TransportAddress(ip: CoreFixture.relayIP, port: 40000)
        #expect(throws: AdoptionRefusal.portUnavailable(outside.main.bound)) {
            try harness.core.adopt(outside, now: harness.now)
        }
        var otherIP = samePort
        otherIP.main.bound = .literal("10.9.9.9:50006")
        #expect(throws: AdoptionRefusal.portUnavailable(otherIP.main.bound)) {
            try harness.core.adopt(otherIP, now: harness.now)
        }
        var sameTuple = adopted
        sameTuple.main.bound = TransportAddress(ip: CoreFixture.relayIP, port: 50006)
        #expect(throws: AdoptionRefusal.fiveTupleInUse) { try harness.core.adopt(sameTuple, now: harness.now) }
        var stream = samePort
        stream.main.bound = TransportAddress(ip: CoreFixture.relayIP, port: 50006)
        stream.origin = harness.origin(CoreFixture.clientB, transport: .dtls)
        #expect(throws: AdoptionRefusal.transportCannotMove) { try harness.core.adopt(stream, now: harness.now) }
        var expired = samePort
        expired.main = .init(bound: TransportAddress(ip: CoreFixture.relayIP, port: 50006), socket: Self.socket, secondsLeft: 0)
        #expect(throws: AdoptionRefusal.expired) { try harness.core.adopt(expired, now: harness.now) }

        #expect(harness.core.allocationCount == 1)
        #expect(harness.admission.total == 1)
        #expect(harness.core.relayPortsInUse == 1)
    }
}
