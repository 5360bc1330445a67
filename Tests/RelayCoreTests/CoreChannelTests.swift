import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// ChannelBind and ChannelData (RFC 8656 §12).
@Suite struct CoreChannelTests {
    private func allocated(transport: TransportProtocol = .udp) throws -> (CoreHarness, TurnTestClient, RelaySocket) {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA, transport: transport)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)))
    }

    @Test(
        "A channel number outside the channel range gets 400 (RFC 8656 §12.2; RFC 5766's 0x4000–0x7FFF is accepted)",
        arguments: [0x0000, 0x0001, 0x3FFF, 0x8000, 0xBFFF, 0xFFFF] as [UInt16])
    func channelOutOfRange(channel: UInt16) throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(channel, to: CoreFixture.peer1).errorCode == 400)
        #expect(harness.allocation(of: CoreFixture.clientA)?.channels.isEmpty == true)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.isEmpty == true)
    }

    @Test(
        "Channel numbers at the edges of RFC 8656's 0x4000–0x4FFF and RFC 5766's 0x4000–0x7FFF can be bound",
        arguments: [0x4000, 0x4FFF, 0x5000, 0x7FFF] as [UInt16])
    func channelRangeEdges(channel: UInt16) throws {
        let (_, client, _) = try allocated()
        let response = try client.channelBind(channel, to: CoreFixture.peer1)
        #expect(response.isSuccess)
        #expect(response.integrity(key: client.key) == .valid)
    }

    @Test("ChannelBind without CHANNEL-NUMBER or XOR-PEER-ADDRESS gets 400")
    func channelBindMissingAttributes() throws {
        let (_, client, _) = try allocated()
        #expect(try client.request(.channelBind) { w in try w.append(ChannelNumber(value: 0x4000)) }.errorCode == 400)
        #expect(
            try client.request(.channelBind) { w in try w.append(XORPeerAddress(address: CoreFixture.peer1)) }.errorCode
                == 400)
    }

    @Test("ChannelBind to a denied peer gets 403; to an IPv6 peer on an IPv4 allocation 443")
    func channelBindPolicy() throws {
        let (_, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: .literal("192.168.1.1:5000")).errorCode == 403)
        #expect(try client.channelBind(0x4000, to: .literal("[2001:4860::1]:5000")).errorCode == 443)
    }

    @Test("ChannelBind without an allocation gets 437")
    func channelBindWithoutAllocation() throws {
        let harness = CoreHarness()
        #expect(
            try harness.restClient(at: CoreFixture.clientA).channelBind(0x4000, to: CoreFixture.peer1).errorCode == 437)
    }

    @Test("A bound channel cannot be rebound to another peer: 400 (RFC 8656 §12.2)")
    func rebindChannelToOtherPeer() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer2).errorCode == 400)
        #expect(harness.allocation(of: CoreFixture.clientA)?.channels.map(\.peer) == [CoreFixture.peer1])
    }

    @Test("A peer bound to one channel cannot be bound to another: 400 (RFC 8656 §12.2)")
    func bindPeerToSecondChannel() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(try client.channelBind(0x4002, to: CoreFixture.peer1).errorCode == 400)
        // The same IP on another port is another peer transport address.
        let samePeerIP = TransportAddress(ip: CoreFixture.peer1.ip, port: 5001)
        #expect(try client.channelBind(0x4002, to: samePeerIP).isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA)?.channels.count == 2)
    }

    @Test("Binding the same channel to the same peer again refreshes it")
    func rebindSameRefreshes() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        harness.advance(by: 500)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA)?.channels.first?.expiry == harness.now + 600)
    }

    @Test("ChannelData from the client goes to the channel's peer as a plain UDP payload (RFC 8656 §12.6)")
    func channelDataToPeer() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        let payload: [UInt8] = Array("hello peer".utf8)
        let sent = harness.receive(StunTestMessages.channelData(0x4000, payload), from: CoreFixture.clientA)
        try #require(sent.count == 1)
        #expect(sent[0].peer?.relaySocket == socket)
        #expect(sent[0].peer?.peer == CoreFixture.peer1)
        #expect(sent[0].bytes == payload)
        #expect(harness.counters.packetsToPeer == 1)
        #expect(harness.counters.bytesToPeer == UInt64(payload.count))
    }

    @Test("Data from a peer with a bound channel reaches the client as ChannelData (RFC 8656 §12.7)")
    func peerDataAsChannelData() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.channelBind(0x4ABC, to: CoreFixture.peer1).isSuccess)
        let payload: [UInt8] = Array("hello client!".utf8)
        let sent = harness.receiveFromPeer(payload, from: CoreFixture.peer1, at: socket)
        try #require(sent.count == 1)
        #expect(sent[0].client == CoreFixture.clientA)
        #expect(sent[0].bytes == [0x4A, 0xBC, 0x00, UInt8(payload.count)] + payload)
        #expect(harness.counters.packetsToClient == 1)
    }

    @Test(
        "Over TCP, ChannelData to the client is padded to a multiple of 4 (RFC 8656 §12.5)", arguments: [1, 2, 3, 4, 5])
    func channelDataPaddedOverStreams(length: Int) throws {
        let (harness, client, socket) = try allocated(transport: .tcp)
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        let payload = [UInt8](repeating: 0x61, count: length)
        let sent = harness.receiveFromPeer(payload, from: CoreFixture.peer1, at: socket)
        let bytes = try #require(sent.first).bytes
        #expect(bytes.count == 4 + (length + 3) / 4 * 4)
        #expect(
            ReceivedChannelData(bytes, padded: true)
                == ReceivedChannelData(StunTestMessages.channelData(0x4000, payload)))
        #expect(bytes[(4 + length)...].allSatisfy { $0 == 0 })
    }

    @Test(
        "Data from a peer without a channel reaches the client as a Data indication with XOR-PEER-ADDRESS and DATA (RFC 8656 §11.3)"
    )
    func peerDataAsDataIndication() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        for length in [0, 1, 2, 3, 4, 5, 1200] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let sent = harness.receiveFromPeer(payload, from: CoreFixture.peer1, at: socket)
            try #require(sent.count == 1)
            let indication = try ReceivedStun(sent[0].bytes)
            #expect(indication.type == MessageType(method: .data, messageClass: .indication))
            #expect(indication.xorPeerAddress == CoreFixture.peer1)
            #expect(indication.data == payload)
            #expect(!indication.contains(.messageIntegrity))
        }
    }

    @Test("With fingerprint configured, Data indications carry a valid FINGERPRINT")
    func dataIndicationFingerprint() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.fingerprint = true })
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let sent = harness.receiveFromPeer(
            [1, 2, 3, 4, 5], from: CoreFixture.peer1, at: try #require(harness.sockets.descriptor(boundTo: relayed)))
        let indication = try ReceivedStun(try #require(sent.first).bytes)  // parsing verifies the CRC
        #expect(indication.attributeTypes.last == .fingerprint)
        #expect(indication.data == [1, 2, 3, 4, 5])
    }

    @Test("An IPv6 peer's data fits the headroom: Data indication on an IPv6 allocation")
    func ipv6DataIndication() throws {
        let harness = CoreHarness(
            options: CoreFixture.options { $0.relayAddresses = [.unmapped(.literal("2001:db8::5"))] })
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(
            try client.allocate { w in try w.append(RequestedAddressFamily(family: .ipv6)) }.xorRelayedAddress)
        let peer = TransportAddress.literal("[2001:4860:4860::8888]:3478")
        #expect(try client.createPermission([peer]).isSuccess)
        let sent = harness.receiveFromPeer(
            [0xAB, 0xCD, 0xEF], from: peer, at: try #require(harness.sockets.descriptor(boundTo: relayed)))
        let indication = try ReceivedStun(try #require(sent.first).bytes)
        #expect(indication.xorPeerAddress == peer)
        #expect(indication.data == [0xAB, 0xCD, 0xEF])
    }

    @Test("A channel lasts 600 s: ChannelData at 599 s is relayed, at 601 s dropped as no_channel (RFC 8656 §12)")
    func channelExpiry() throws {
        let (harness, client, socket) = try allocated()
        let bound = harness.now
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        // Keep the allocation and the permission alive; only the channel is left to expire.
        harness.advance(to: bound + 250)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        harness.advance(to: bound + 500)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(try client.refresh().isSuccess)

        harness.advance(to: bound + 599)
        #expect(harness.receive(StunTestMessages.channelData(0x4000, [1]), from: CoreFixture.clientA).count == 1)
        #expect(
            ReceivedChannelData(
                try #require(harness.receiveFromPeer([2], from: CoreFixture.peer1, at: socket).first).bytes) != nil)

        harness.advance(to: bound + 601)
        harness.sweep()
        #expect(harness.receive(StunTestMessages.channelData(0x4000, [1]), from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.noChannel) == 1)
        // The permission still stands, so the peer's data now arrives as a Data indication.
        let indication = try ReceivedStun(
            try #require(harness.receiveFromPeer([2], from: CoreFixture.peer1, at: socket).first).bytes)
        #expect(indication.type == MessageType(method: .data, messageClass: .indication))
    }

    @Test("ChannelData on an unbound channel is dropped as no_channel; without an allocation as no_allocation")
    func channelDataWithoutChannel() throws {
        let (harness, _, _) = try allocated()
        #expect(harness.receive(StunTestMessages.channelData(0x4000, [1]), from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.noChannel) == 1)
        #expect(harness.receive(StunTestMessages.channelData(0x4000, [1]), from: CoreFixture.clientB).isEmpty)
        #expect(harness.counters.dropped(.noAllocation) == 1)
    }

    @Test("ChannelBind installs a permission for the peer's IP (RFC 8656 §12.2)")
    func channelBindInstallsPermission() throws {
        let (harness, client, _) = try allocated()
        #expect(try client.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.hasPermission(for: CoreFixture.peer1.ip, now: harness.now))
        #expect(!allocation.hasPermission(for: CoreFixture.peer1.ip, now: harness.now + 300))
    }
}
