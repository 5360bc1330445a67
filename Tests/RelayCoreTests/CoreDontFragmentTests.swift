import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// DONT-FRAGMENT on Allocate (RFC 8656 §7.2, §18.9): the core asks the I/O layer to make the relay
/// socket send without fragmenting, and keeps the allocation's channels out of the kernel fast
/// path, whose redirect would not honour it.
@Suite struct CoreDontFragmentTests {
    @Test("Allocate with DONT-FRAGMENT succeeds and asks for its relay socket to send unfragmented")
    func allocateWithDontFragment() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let allocated = try client.allocate { w in try w.append(DontFragment()) }
        #expect(allocated.isSuccess, "\(allocated.description)")
        let relayed = try #require(allocated.xorRelayedAddress)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))
        #expect(harness.dontFragment == [socket])
        #expect(harness.allocation(of: CoreFixture.clientA)?.dontFragment == true)
        // Its channels stay with the core.
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(harness.channelCommands.isEmpty)
        let sent = harness.receive(StunTestMessages.channelData(0x4001, [9, 8, 7]), from: CoreFixture.clientA)
        #expect(sent.first?.peer?.relaySocket == socket && sent.first?.bytes == [9, 8, 7])
    }

    @Test("Without DONT-FRAGMENT nothing is asked, and channels are offered to the fast path")
    func allocateWithout() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(harness.dontFragment.isEmpty)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        #expect(!harness.channelCommands.isEmpty)
    }

    @Test("A Send indication's own DONT-FRAGMENT marks that datagram only (RFC 8656 §11.2)")
    func sendIndicationDontFragment() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let marked = try StunTestMessages.build(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: CoreFixture.peer1))
            try w.append(DataAttribute(bytes: [1, 2]))
            try w.append(DontFragment())
        }
        let sent = harness.receive(marked, from: CoreFixture.clientA)
        #expect(sent.count == 1 && sent[0].dontFragment && sent[0].bytes == [1, 2])
        let plain = harness.receive(
            try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [3]), from: CoreFixture.clientA)
        #expect(plain.count == 1 && !plain[0].dontFragment)
        // ChannelData has no way to ask: never marked.
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        let channel = harness.receive(StunTestMessages.channelData(0x4001, [4]), from: CoreFixture.clientA)
        #expect(channel.count == 1 && !channel[0].dontFragment)
    }

    @Test("In an allocation with DONT-FRAGMENT every datagram already leaves unfragmented: none is marked")
    func allocationWideDontFragment() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate { w in try w.append(DontFragment()) }.isSuccess)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let marked = try StunTestMessages.build(MessageType(method: .send, messageClass: .indication)) { w in
            try w.append(XORPeerAddress(address: CoreFixture.peer1))
            try w.append(DataAttribute(bytes: [1]))
            try w.append(DontFragment())
        }
        let sent = harness.receive(marked, from: CoreFixture.clientA)
        #expect(sent.count == 1 && !sent[0].dontFragment)
    }
}
