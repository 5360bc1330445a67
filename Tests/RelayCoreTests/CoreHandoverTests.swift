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
}
