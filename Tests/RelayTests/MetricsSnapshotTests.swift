@testable import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Each loop thread publishes a snapshot of its core; the scrape sums the snapshots.
@Suite struct MetricsSnapshotTests {
    @Test("A snapshot counts live allocations, permissions and channels and copies the counters")
    func capture() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        #expect(try client.createPermission([CoreFixture.peer1, CoreFixture.peer2]).isSuccess)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        harness.receive(StunTestMessages.channelData(0x4000, [1, 2, 3]), from: CoreFixture.clientA)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        harness.receiveFromPeer([9, 9], from: CoreFixture.peer1, at: socket)

        let m = LoopMetrics(capturing: harness.core, now: harness.now)
        #expect(m.allocations(.udp, .ipv4) == 1)
        #expect(m.allocations(.udp, .ipv6) == 0)
        #expect(m.permissionsActive == 2)
        #expect(m.channelsActive == 1)
        #expect(m.counters.allocationsCreated == 1)
        #expect(m.counters.packetsToPeer == 1)
        #expect(m.counters.bytesToPeer == 3)
        #expect(m.counters.packetsToClient == 1)
        #expect(m.counters.bytesToClient == 2)
        #expect(m.relayPortsInUse == 1)
        #expect(m.relayPortsFree == UInt64(CoreFixture.maxPort - CoreFixture.minPort))

        // Permissions end after 300 s, while the allocation and channel (600 s) live on.
        let later = LoopMetrics(capturing: harness.core, now: harness.now + 301)
        #expect(later.permissionsActive == 0)
        #expect(later.channelsActive == 1)
    }

    @Test("An allocation's lifetime is observed when it ends, by refresh 0 or by expiry")
    func lifetimes() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        _ = try client.allocate()
        harness.advance(by: 42)
        #expect(try client.refresh(lifetime: 0).isSuccess)
        let other = harness.restClient(at: CoreFixture.clientB)
        _ = try other.allocate(lifetime: 600)
        harness.advance(by: 601)
        harness.sweep()

        // The loop's session metrics observe the ended sessions the core emitted.
        let sessions = SessionMetrics()
        for event in harness.sessionEvents { sessions.observe(event) }
        var m = LoopMetrics(capturing: harness.core, now: harness.now)
        m.lifetimes.add(sessions.lifetimes)
        #expect(m.lifetimes.count == 2)
        #expect(m.lifetimes.sum == 42 + 601)
        #expect(m.lifetimes.cumulativeCounts[LifetimeHistogram.bounds.firstIndex(of: 60)!] == 1)
        #expect(m.lifetimes.cumulativeCounts[LifetimeHistogram.bounds.firstIndex(of: 600)!] == 1)
        #expect(m.lifetimes.cumulativeCounts[LifetimeHistogram.bounds.firstIndex(of: 1800)!] == 2)
        #expect(m.counters.allocationsDeleted == 1)
        #expect(m.counters.allocationsExpired == 1)
        #expect(m.allocations(.udp, .ipv4) == 0)
    }

    @Test("A snapshot does not share storage with the core: later traffic does not change it")
    func snapshotIsACopy() {
        let harness = CoreHarness()
        harness.core.counters.drop(.malformed)
        let m = LoopMetrics(capturing: harness.core, now: harness.now)
        harness.core.counters.drop(.malformed)
        #expect(m.counters.dropped(.malformed) == 1)
        #expect(harness.core.counters.dropped(.malformed) == 2)
    }

    @Test("The registry sums every thread's latest snapshot")
    func registrySums() {
        let registry = MetricsRegistry(threads: 3)
        var a = LoopMetrics()
        a.counters.packetsToPeer = 5
        a.allocationsActive[LoopMetrics.allocationIndex(.udp, .ipv4)] = 1
        a.lifetimes.observe(seconds: 20)
        var b = LoopMetrics()
        b.counters.packetsToPeer = 7
        b.counters.drop(.policy)
        b.allocationsActive[LoopMetrics.allocationIndex(.udp, .ipv4)] = 2
        b.relayPortsFree = 10
        b.lifetimes.observe(seconds: 20_000)
        registry.slots[0].publish(a)
        registry.slots[2].publish(b)
        var total = registry.total()
        #expect(total.counters.packetsToPeer == 12)
        #expect(total.counters.dropped(.policy) == 1)
        #expect(total.allocations(.udp, .ipv4) == 3)
        #expect(total.relayPortsFree == 10)
        #expect(total.lifetimes.count == 2)
        #expect(total.lifetimes.sum == 20_020)

        b.counters.packetsToPeer = 8
        registry.slots[2].publish(b)
        total = registry.total()
        #expect(total.counters.packetsToPeer == 13)
    }

    @Test(
        "Lifetime buckets hold values up to and including their bound",
        arguments: [
            (0, 0), (10, 0), (11, 1), (30, 1), (31, 2), (86_400, 9), (86_401, 10), (-5, 0),
        ] as [(Int64, Int)])
    func buckets(seconds: Int64, bucket: Int) {
        var h = LifetimeHistogram()
        h.observe(seconds: seconds)
        #expect(h.counts[bucket] == 1)
        #expect(h.count == 1)
    }
}
