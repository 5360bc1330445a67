import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The core's effects other than packets (`CoreCommand`): channel routes for a data plane outside
/// the core, relay sockets closed, session summaries; each a value the I/O layer executes.
@Suite struct CoreCommandTests {
    private func allocated(transport: TransportProtocol = .udp) throws -> (CoreHarness, TurnTestClient, RelaySocket) {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: transport)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)))
    }

    private func installs(_ harness: CoreHarness) -> [ChannelRoute] {
        harness.channelCommands.compactMap { if case .install(let r) = $0 { r } else { nil } }
    }

    private func removals(_ harness: CoreHarness) -> [ChannelRoute] {
        harness.channelCommands.compactMap { if case .remove(let r) = $0 { r } else { nil } }
    }

    @Test("A ChannelBind announces the channel's route, valid until its earliest expiry (RFC 8656 §9, §12)")
    func channelBindInstallsRoute() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        let route = try #require(installs(harness).last)
        #expect(installs(harness).count == 1)
        #expect(route.number == 0x4000)
        #expect(route.peer == CoreFixture.peer1)
        #expect(route.client == CoreFixture.clientA)
        #expect(route.server == CoreFixture.server)
        #expect(route.relaySocket == socket)
        #expect(route.relayed == harness.sockets.bound[socket])
        #expect(route.clientSocket == harness.listenerSocket)
        // Permission 300 s, channel 600 s, allocation 600 s: the permission ends first.
        #expect(route.expiry == harness.now + 300)
    }

    @Test("A CreatePermission for a channel's peer announces the route again with the later expiry")
    func permissionRefreshReannounces() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        harness.advance(by: 200)
        #expect(try client.createPermission([CoreFixture.peer2]).isSuccess)
        #expect(installs(harness).count == 1, "a permission for another peer leaves the route alone")
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(installs(harness).count == 2)
        #expect(installs(harness).last?.expiry == harness.now + 300)
    }

    @Test("When the permission lapses under a live channel the route is withdrawn once; a new permission restores it")
    func permissionExpiryWithdrawsRoute() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(try client.refresh(lifetime: 3600).isSuccess)
        harness.advance(by: 299)
        harness.sweep()
        #expect(removals(harness).isEmpty)
        harness.advance(by: 1)
        harness.sweep()
        harness.advance(by: 1)
        harness.sweep()
        #expect(removals(harness).count == 1)
        #expect(removals(harness).first?.number == 0x4000)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        // The channel, bound at the start for 600 s, now ends before the new permission.
        #expect(installs(harness).last?.expiry == CoreFixture.start + 600)
    }

    @Test("A Refresh moves the routes' expiry with the allocation's; Refresh 0 withdraws them and closes the socket")
    func refreshAndDeletion() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.maxAllocateLifetime = 120 })
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer2).isSuccess)
        // A 120 s allocation ends before its permissions (300 s) and channels (600 s).
        #expect(installs(harness).allSatisfy { $0.expiry == CoreFixture.start + 120 })
        harness.advance(by: 100)
        #expect(try client.refresh(lifetime: 120).isSuccess)
        let refreshed = installs(harness).suffix(2)
        #expect(installs(harness).count == 4)
        #expect(refreshed.allSatisfy { $0.expiry == harness.now + 120 })
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(Set(removals(harness).map(\.number)) == [0x4000, 0x4001])
        #expect(harness.sockets.closed == [socket])
        let summary = try #require(harness.sessions.last)
        #expect(summary.reason == .refreshedToZero)
        #expect(summary.channelsUsed == 2)
        #expect(summary.fiveTuple.client == CoreFixture.clientA)
    }

    @Test("An expired allocation's summary carries what it relayed")
    func expirySummary() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        _ = harness.receive(StunTestMessages.channelData(0x4000, [1, 2, 3]), from: CoreFixture.clientA)
        harness.advance(by: 600)
        harness.sweep()
        let summary = try #require(harness.sessions.last)
        #expect(summary.reason == .expired)
        #expect(summary.durationSeconds == 600)
        #expect(summary.traffic.packetsToPeer == 1)
        #expect(summary.traffic.bytesToPeer == 3)
        #expect(summary.user == "alice")
        #expect(removals(harness).map(\.number) == [0x4000])
    }

    @Test("A TCP client's channels are not announced: its ChannelData travels in a byte stream")
    func streamChannelsNotAnnounced() throws {
        let (harness, client, _) = try allocated(transport: .tcp)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(harness.channelCommands.isEmpty)
        #expect(harness.started == 1)
        #expect(harness.sessions.count == 1)
    }

    @Test("An allocation with a max-bps budget announces no route: the core meters each of its packets")
    func budgetedAllocationNotAnnounced() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.maxBPS = 100_000 })
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(harness.channelCommands.isEmpty)
    }

    @Test("A channel to a relayed address in its external-ip public form announces no route")
    func publicFormOfOwnRelayNotAnnounced() throws {
        let publicIP = IPAddress.literal("203.0.113.7")
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: publicIP)]
            })
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        // Another allocation (of another loop) holds the relayed address.
        harness.core.tables.ports.mark(CoreFixture.maxPort, on: CoreFixture.relayIP, as: .udpAllocation)
        #expect(try client.channelBind(0x4000, to: TransportAddress(ip: publicIP, port: CoreFixture.maxPort)).isSuccess)
        #expect(harness.channelCommands.isEmpty)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(installs(harness).map(\.number) == [0x4001])
    }

    @Test("A reload whose peer policy denies a channel's peer unbinds the channel and withdraws its route")
    func reloadedPolicyWithdrawsRoutes() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer2).isSuccess)
        let stricter = CoreFixture.options { $0.deniedPeerIPs = [IPRange("1.2.3.0/24")!] }
        harness.core.update(context: CoreFixture.context(stricter, ledger: harness.admission))
        _ = harness.drainOutbox()
        #expect(removals(harness).map(\.number) == [0x4000])
        #expect(harness.receive(StunTestMessages.channelData(0x4000, [1, 2, 3]), from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.noChannel) == 1)
        #expect(harness.receive(StunTestMessages.channelData(0x4001, [1, 2, 3]), from: CoreFixture.clientA).count == 1)
    }
}
