import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Dual allocations (ADDITIONAL-ADDRESS-FAMILY, RFC 8656 §7.2 step 9, §8.1): one IPv4 and one
/// IPv6 relayed address, permissions and channels per family, each family refreshed, deleted and
/// expired on its own.
@Suite struct CoreDualAllocationTests {
    static let v4Relay = IPAddress.literal("10.0.0.5")
    static let v6Relay = IPAddress.literal("2001:db8::5")
    static let peer6 = TransportAddress.literal("[2a00:1450:4001::7]:7000")

    private func harness(_ relays: [IPAddress] = [v4Relay, v6Relay]) -> CoreHarness {
        CoreHarness(options: CoreFixture.options { $0.relayAddresses = relays.map(RelayAddress.unmapped) })
    }

    private static func additional(_ w: inout StunMessageWriter) throws { try w.append(AdditionalAddressFamily(family: .ipv6)) }

    /// A dual allocation: the harness, the client, and the IPv4 and IPv6 relay sockets.
    private func dual() throws -> (CoreHarness, TurnTestClient, RelaySocket, RelaySocket) {
        let harness = harness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate(Self.additional)
        #expect(answer.isSuccess, "\(answer.description)")
        let relayed = answer.xorRelayedAddresses
        try #require(relayed.count == 2)
        return (
            harness, client, try #require(harness.sockets.descriptor(boundTo: relayed[0])),
            try #require(harness.sockets.descriptor(boundTo: relayed[1]))
        )
    }

    private func refresh(_ client: TurnTestClient, lifetime: UInt32, family: IPAddress.Family?) throws -> ReceivedStun {
        try client.request(.refresh) { w in
            try w.append(Lifetime(seconds: lifetime))
            if let family { try w.append(RequestedAddressFamily(family: family)) }
        }
    }

    @Test("ADDITIONAL-ADDRESS-FAMILY gives an IPv4 and an IPv6 relayed address, IPv4 first, no ADDRESS-ERROR-CODE")
    func bothFamilies() throws {
        let (harness, _, socket4, socket6) = try dual()
        #expect(harness.sockets.bound[socket4]?.ip == Self.v4Relay)
        #expect(harness.sockets.bound[socket6]?.ip == Self.v6Relay)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.serves(.ipv4) && allocation.serves(.ipv6))
        #expect(harness.core.relayPortsInUse == 2)
    }

    @Test(
        "400 for ADDITIONAL-ADDRESS-FAMILY IPv4, or with REQUESTED-ADDRESS-FAMILY, EVEN-PORT R or RESERVATION-TOKEN",
        arguments: 0..<4)
    func badCombinations(case index: Int) throws {
        let harness = harness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate { w in
            switch index {
            case 0: try w.append(AdditionalAddressFamily(family: .ipv4))
            case 1:
                try w.append(AdditionalAddressFamily(family: .ipv6))
                try w.append(RequestedAddressFamily(family: .ipv6))
            case 2:
                try w.append(AdditionalAddressFamily(family: .ipv6))
                try w.append(EvenPort(reservePair: true))
            default:
                try w.append(AdditionalAddressFamily(family: .ipv6))
                try w.append(ReservationToken(value: 42))
            }
        }
        #expect(answer.errorCode == 400, "\(answer.description)")
        #expect(harness.sockets.bound.isEmpty)
    }

    @Test("A server with one family grants that one, with ADDRESS-ERROR-CODE 440 for the other", arguments: [true, false])
    func oneFamilyOnly(ipv4: Bool) throws {
        let harness = harness([ipv4 ? Self.v4Relay : Self.v6Relay])
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate(Self.additional)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(answer.xorRelayedAddresses.map(\.ip) == [ipv4 ? Self.v4Relay : Self.v6Relay])
        let error = try #require(answer.decode(AddressErrorCode.self))
        #expect(error.family == (ipv4 ? .ipv6 : .ipv4))
        #expect(error.code == 440)
        #expect(harness.allocation(of: CoreFixture.clientA)?.additional == nil)
    }

    @Test("No port left in one family: that family gets ADDRESS-ERROR-CODE 508")
    func oneFamilyFull() throws {
        let harness = harness()
        // Every IPv6 relay port taken by single-family allocations.
        for i in 0..<Int(CoreFixture.maxPort - CoreFixture.minPort + 1) {
            let client = harness.restClient(at: TransportAddress(ip: CoreFixture.clientB.ip, port: UInt16(41000 + i)))
            #expect(try client.allocate { w in try w.append(RequestedAddressFamily(family: .ipv6)) }.isSuccess)
        }
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate(Self.additional)
        #expect(answer.isSuccess, "\(answer.description)")
        #expect(answer.xorRelayedAddresses.map(\.ip) == [Self.v4Relay])
        #expect(answer.decode(AddressErrorCode.self).map { [$0.code, Int($0.family.rawValue)] } == [508, 2])
    }

    @Test("Permissions of both families in one CreatePermission; each peer is sent to from its family's socket")
    func perFamilyRelaying() throws {
        let (harness, client, socket4, socket6) = try dual()
        #expect(try client.createPermission([CoreFixture.peer1, Self.peer6]).isSuccess)
        for (peer, socket) in [(CoreFixture.peer1, socket4), (Self.peer6, socket6)] {
            let sent = harness.receive(
                try StunTestMessages.sendIndication(to: peer, payload: [1, 2]), from: CoreFixture.clientA)
            #expect(sent.first?.peer?.relaySocket == socket && sent.first?.peer?.peer == peer)
            let back = harness.receiveFromPeer([3, 4], from: peer, at: socket)
            #expect(try ReceivedStun(try #require(back.first).bytes).xorPeerAddress == peer)
        }
        // A channel to the IPv6 peer relays from the IPv6 socket, and its route names it.
        #expect(try client.channelBind(0x4001, to: Self.peer6).isSuccess)
        let sent = harness.receive(StunTestMessages.channelData(0x4001, [5]), from: CoreFixture.clientA)
        #expect(sent.first?.peer?.relaySocket == socket6)
        let routes = harness.channelCommands.compactMap { if case .install(let r) = $0 { r } else { nil } }
        #expect(routes.last?.relaySocket == socket6 && routes.last?.relayed.ip == Self.v6Relay)
    }

    @Test("Refresh with REQUESTED-ADDRESS-FAMILY IPv6 and LIFETIME 0 ends only the IPv6 address and its peers")
    func deleteOneFamily() throws {
        let (harness, client, socket4, socket6) = try dual()
        #expect(try client.createPermission([CoreFixture.peer1, Self.peer6]).isSuccess)
        #expect(try refresh(client, lifetime: 0, family: .ipv6).isSuccess)
        #expect(harness.sockets.closed == [socket6])
        #expect(try client.createPermission([Self.peer6]).errorCode == 443)
        let sent = harness.receive(
            try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1]), from: CoreFixture.clientA)
        #expect(sent.first?.peer?.relaySocket == socket4)
        #expect(try refresh(client, lifetime: 0, family: .ipv6).errorCode == 443)
        #expect(harness.core.relayPortsInUse == 1)
    }

    @Test("Ending the IPv4 address leaves the IPv6 one as the allocation's relayed address")
    func deleteFirstFamily() throws {
        let (harness, client, socket4, socket6) = try dual()
        #expect(try client.createPermission([CoreFixture.peer1, Self.peer6]).isSuccess)
        #expect(try refresh(client, lifetime: 0, family: .ipv4).isSuccess)
        #expect(harness.sockets.closed == [socket4])
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.relaySocket == socket6 && allocation.additional == nil)
        #expect(!allocation.hasPermission(for: CoreFixture.peer1.ip, now: harness.now))
        let back = harness.receiveFromPeer([9], from: Self.peer6, at: socket6)
        #expect(back.count == 1)
        #expect(try refresh(client, lifetime: 0, family: nil).isSuccess)
        #expect(harness.sockets.bound.isEmpty && harness.core.allocationCount == 0)
    }

    @Test("Each family expires on its own: refreshing only IPv4 lets IPv6 lapse")
    func perFamilyExpiry() throws {
        let (harness, client, socket4, socket6) = try dual()
        harness.advance(by: 500)
        #expect(try refresh(client, lifetime: 600, family: .ipv4).isSuccess)
        harness.advance(by: 101)
        harness.sweep()
        #expect(harness.sockets.closed == [socket6])
        #expect(harness.allocation(of: CoreFixture.clientA)?.relaySocket == socket4)
        harness.advance(by: 500)
        harness.sweep()
        #expect(harness.sockets.bound.isEmpty && harness.core.allocationCount == 0)
    }

    @Test("Refresh without REQUESTED-ADDRESS-FAMILY refreshes and deletes both")
    func refreshBoth() throws {
        let (harness, client, _, _) = try dual()
        harness.advance(by: 500)
        #expect(try client.refresh(lifetime: 600).isSuccess)
        harness.advance(by: 500)
        harness.sweep()
        #expect(harness.sockets.bound.count == 2)
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(harness.sockets.bound.isEmpty && harness.core.relayPortsInUse == 0)
    }

    @Test("A single-family allocation still answers 443 to a Refresh for the other family")
    func singleFamilyRefresh() throws {
        let harness = harness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try refresh(client, lifetime: 600, family: .ipv6).errorCode == 443)
        #expect(try client.createPermission([Self.peer6]).errorCode == 443)
    }
}
