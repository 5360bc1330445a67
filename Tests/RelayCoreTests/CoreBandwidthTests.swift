import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// `max-bps` (bytes a second per allocation, each direction apart) and `bps-capacity` (what all
/// allocations together may reserve), as coturn defines them.
@Suite struct CoreBandwidthTests {
    private static func limited(_ maxBPS: Int, capacity: Int = 0) -> CoreFixture.Options {
        CoreFixture.options {
            $0.settings.maxBPS = maxBPS
            $0.bpsCapacity = capacity
        }
    }

    @Test("A budget takes bytes up to its limit in a second, refuses what does not fit, and starts again the next second")
    func budgetWindow() {
        let budget = BandwidthBudget(bytesPerSecond: 1000)
        let t: Int64 = 1_700_000_000
        #expect(budget.admit(.toPeer, bytes: 600, now: t))
        #expect(budget.admit(.toPeer, bytes: 400, now: t))
        #expect(!budget.admit(.toPeer, bytes: 1, now: t))
        #expect(budget.used(.toPeer, now: t) == 1000)
        // The other direction has its own budget.
        #expect(budget.admit(.toClient, bytes: 1000, now: t))
        #expect(!budget.admit(.toClient, bytes: 1, now: t))
        // A refused packet takes nothing: a smaller one still fits.
        #expect(budget.admit(.toPeer, bytes: 700, now: t + 1))
        #expect(!budget.admit(.toPeer, bytes: 301, now: t + 1))
        #expect(budget.admit(.toPeer, bytes: 300, now: t + 1))
        // A packet larger than the whole budget never passes.
        #expect(!budget.admit(.toClient, bytes: 1001, now: t + 5))
        #expect(budget.used(.toClient, now: t + 5) == 0)
    }

    @Test("Threads sharing a budget never take more than its limit in one second together")
    func budgetAcrossThreads() async {
        let budget = BandwidthBudget(bytesPerSecond: 100_000)
        let t: Int64 = 1_700_000_000
        // Four tasks on the global executor's threads; each returns what it was let take.
        let admitted = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var mine = 0
                    for _ in 0..<10_000 where budget.admit(.toClient, bytes: 7, now: t) { mine += 1 }
                    return mine
                }
            }
            return await group.reduce(0, +)
        }
        #expect(admitted == 100_000 / 7)
        #expect(budget.used(.toClient, now: t) == (100_000 / 7) * 7)
    }

    @Test("A packet stamped a second behind the stored window is charged to it; a clock stepped far back starts anew")
    func budgetClockSkew() {
        let budget = BandwidthBudget(bytesPerSecond: 1000)
        let t: Int64 = 1_700_000_000
        #expect(budget.admit(.toPeer, bytes: 900, now: t + 1))
        // Another loop still reading second t: its packet does not reset t+1's window.
        #expect(!budget.admit(.toPeer, bytes: 200, now: t))
        #expect(budget.admit(.toPeer, bytes: 100, now: t))
        #expect(budget.used(.toPeer, now: t + 1) == 1000)
        // Stepped back an hour: a new window, not one stuck until the clock catches up.
        #expect(budget.admit(.toPeer, bytes: 1000, now: t - 3600))
    }

    @Test("A refund gives bytes back within the window they were taken in, never below zero")
    func budgetRefund() {
        let budget = BandwidthBudget(bytesPerSecond: 1000)
        let t: Int64 = 1_700_000_000
        #expect(budget.admit(.toClient, bytes: 1000, now: t))
        budget.refund(.toClient, bytes: 400, now: t)
        #expect(budget.used(.toClient, now: t) == 600)
        #expect(budget.admit(.toClient, bytes: 400, now: t))
        budget.refund(.toClient, bytes: 5000, now: t)
        #expect(budget.used(.toClient, now: t) == 0)
        // A window that has moved on keeps its count.
        #expect(budget.admit(.toClient, bytes: 300, now: t + 1))
        budget.refund(.toClient, bytes: 300, now: t + 5)
        #expect(budget.used(.toClient, now: t + 1) == 300)
    }

    @Test("With max-bps, client-to-peer bytes over the second's budget are dropped and counted bandwidth")
    func clientToPeerLimited() throws {
        let harness = CoreHarness(options: Self.limited(1000))
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        let payload = [UInt8](repeating: 7, count: 300)
        var relayed = 0
        for i in 0..<4 {
            let message =
                i % 2 == 0
                ? StunTestMessages.channelData(0x4000, payload)
                : try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: payload)
            relayed += harness.receive(message, from: CoreFixture.clientA).count
        }
        #expect(relayed == 3)
        #expect(harness.counters.dropped(.bandwidth) == 1)
        #expect(harness.counters.bytesToPeer == 900)
        #expect(harness.allocation(of: CoreFixture.clientA)?.traffic.packetsToPeer == 3)
        // Requests are not payload: a Refresh is answered while the budget is spent.
        #expect(try client.refresh(lifetime: 600).isSuccess)
        // The next second has a fresh budget.
        harness.advance(by: 1)
        #expect(harness.receive(StunTestMessages.channelData(0x4000, payload), from: CoreFixture.clientA).count == 1)
    }

    @Test("With max-bps, peer-to-client bytes are limited apart from client-to-peer ones")
    func peerToClientLimited() throws {
        let harness = CoreHarness(options: Self.limited(1000))
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let payload = [UInt8](repeating: 9, count: 400)
        // The client-to-peer budget is spent first; the other direction is untouched.
        #expect(harness.receive(try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: Array(payload + payload)), from: CoreFixture.clientA).count == 1)
        let delivered = (0..<3).map { _ in harness.receiveFromPeer(payload, from: CoreFixture.peer1, at: socket).count }
        #expect(delivered == [1, 1, 0])
        #expect(harness.counters.dropped(.bandwidth) == 1)
        #expect(harness.counters.packetsToClient == 2)
    }

    @Test("Without max-bps nothing is limited and no budget is kept")
    func unlimitedByDefault() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA)?.bandwidth == nil)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let payload = [UInt8](repeating: 1, count: 1200)
        for _ in 0..<100 {
            _ = harness.receive(try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: payload), from: CoreFixture.clientA)
        }
        #expect(harness.counters.packetsToPeer == 100)
        #expect(harness.counters.dropped(.bandwidth) == 0)
    }

    @Test("bps-capacity: allocations reserve max-bps, then the rest; with none left Allocate gets 486; a delete makes room")
    func capacityRefusesAllocate() throws {
        let harness = CoreHarness(options: Self.limited(1000, capacity: 1500))
        let first = harness.restClient(at: CoreFixture.clientA, user: "alice")
        #expect(try first.allocate().isSuccess)
        let second = harness.restClient(at: CoreFixture.clientB, user: "carol")
        #expect(try second.allocate().isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA)?.bandwidth?.bytesPerSecond == 1000)
        #expect(harness.allocation(of: CoreFixture.clientB)?.bandwidth?.bytesPerSecond == 500)
        let third = harness.restClient(at: .literal("192.0.2.3:40003"), user: "dave")
        #expect(try third.allocate().errorCode == 486)
        #expect(harness.admission.total == 2)
        #expect(harness.sockets.opens == 2)
        #expect(try first.refresh(lifetime: 0).isSuccess)
        #expect(harness.admission.reservedBytesPerSecond == 500)
        #expect(try third.allocate().isSuccess)
        #expect(harness.admission.reservedBytesPerSecond == 1500)
        // Expiry returns the reservations too.
        harness.advance(by: 3601)
        harness.sweep()
        #expect(harness.admission.reservedBytesPerSecond == 0)
    }

    @Test("An Allocate that fails after its reservation (no relay port: 508) returns it")
    func failedAllocateReleases() throws {
        let harness = CoreHarness(options: Self.limited(1000, capacity: 1000))
        harness.sockets.refusedPorts = Set(CoreFixture.minPort...CoreFixture.maxPort)
        #expect(try harness.restClient(at: CoreFixture.clientA).allocate().errorCode == 508)
        #expect(harness.admission.reservedBytesPerSecond == 0)
        harness.sockets.refusedPorts = []
        // The refused ports are back in the search a minute on (`RelayPortPool.foreignPortSeconds`).
        harness.advance(by: RelayPortPool.foreignPortSeconds)
        harness.sweep()
        #expect(try harness.restClient(at: CoreFixture.clientB).allocate().isSuccess)
        #expect(harness.admission.reservedBytesPerSecond == 1000)
    }

    @Test("A packet another loop counted but a stream connection refused gives its bytes back to the target's budget")
    func refusedCrossLoopRefunds() throws {
        let sink = RecordingStreamSink()
        let pair = try RelayPair(loops: 2, Self.limited(1000), transportB: .tcp, streamSink: sink)
        #expect(try pair.a.createPermission([pair.relayedB]).isSuccess)
        #expect(try pair.b.createPermission([pair.relayedA]).isSuccess)
        let allocationB = try #require(pair.receiver.allocation(of: CoreFixture.clientB, transport: .tcp))
        sink.refuse()
        _ = pair.sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [UInt8](repeating: 1, count: 600)),
            from: CoreFixture.clientA)
        #expect(sink.packets.isEmpty)
        #expect(allocationB.bandwidth?.used(.toClient, now: pair.sender.now) == 0)
        sink.accept()
        _ = pair.sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [UInt8](repeating: 2, count: 300)),
            from: CoreFixture.clientA)
        #expect(sink.packets.count == 1)
        #expect(allocationB.bandwidth?.used(.toClient, now: pair.sender.now) == 300)
    }

    @Test(
        "A short-circuited packet is charged to the sender's client-to-peer and the target's peer-to-client budget; across loops the target's budget is shared",
        arguments: [1, 2])
    func shortCircuitCharged(loops: Int) throws {
        let pair = try RelayPair(loops: loops, Self.limited(1000))
        let (sender, receiver) = (pair.sender, pair.receiver)
        #expect(try pair.b.createPermission([CoreFixture.peer1, pair.relayedA]).isSuccess)
        #expect(try pair.a.createPermission([pair.relayedB]).isSuccess)
        let socketB = try #require(receiver.sockets.descriptor(boundTo: pair.relayedB))
        // B's own loop delivers 700 bytes from an outside peer this second ...
        #expect(receiver.receiveFromPeer([UInt8](repeating: 1, count: 700), from: CoreFixture.peer1, at: socketB).count == 1)
        // ... so 400 from A do not fit B's budget, though A's own has room: dropped on A's loop.
        let over = sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [UInt8](repeating: 2, count: 400)),
            from: CoreFixture.clientA)
        #expect(over.isEmpty)
        #expect(sender.counters.dropped(.bandwidth) == 1)
        let allocationA = try #require(sender.allocation(of: CoreFixture.clientA))
        let allocationB = try #require(receiver.allocation(of: CoreFixture.clientB))
        #expect(allocationA.bandwidth?.used(.toPeer, now: sender.now) == 400)
        #expect(allocationB.bandwidth?.used(.toClient, now: sender.now) == 700)
        if loops > 1 { #expect(sender.core.tables.directory.delivered(to: pair.relayedB)?.packets == 0) }
        // 300 still fit.
        let fits = sender.receive(
            try StunTestMessages.sendIndication(to: pair.relayedB, payload: [UInt8](repeating: 3, count: 300)),
            from: CoreFixture.clientA)
        #expect(fits.count == 1 && fits[0].client == CoreFixture.clientB)
        #expect(allocationB.bandwidth?.used(.toClient, now: sender.now) == 1000)
        if loops > 1 { #expect(sender.core.tables.directory.delivered(to: pair.relayedB)?.bytes == 300) }
    }
}
