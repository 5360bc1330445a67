import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The core's output is one ordered stream (docs/architecture.md, "The command flow"), and the
/// ordering rules are the core's: what an answer confirms is emitted before the answer, so the
/// loop, executing in order, has it in place before the client can act on the answer.
@Suite struct CoreOutputOrderTests {
    @Test("ChannelBind: the channel's route comes before the answer that confirms it (RFC 8656 §12.1)")
    func routeBeforeChannelBindAnswer() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        harness.stream = []
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        // The relay socket is read from (its first permission) before the answer, too.
        #expect(harness.stream == ["watchRelaySocket", "installChannel", "packet to client"])
    }

    @Test("A move with a mobility ticket: the client is steered to this loop before the answer reaches it (RFC 8016)")
    func steerBeforeMoveAnswer() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate { w in try w.append(MobilityTicket(bytes: [])) }
        let ticket = try #require(answer.decode(MobilityTicket.self)).bytes
        let moved = harness.restClient(at: .literal("198.51.100.20:50123"))
        try moved.challenge()
        harness.stream = []
        let bytes = try moved.signedRequest(.refresh) { w in
            try w.append(Lifetime(seconds: 600))
            try w.append(MobilityTicket(bytes: ticket))
        }
        let sent = harness.receive(bytes, from: .literal("198.51.100.20:50123"))
        #expect(try ReceivedStun(try #require(sent.first).bytes).isSuccess)
        let steer = try #require(harness.stream.firstIndex(of: "steerClient"))
        let reply = try #require(harness.stream.firstIndex(of: "packet to client"))
        #expect(steer < reply, "\(harness.stream)")
    }

    @Test("An allocation's end: routes withdrawn and the socket closed in the stream before its summary")
    func endOrder() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.channelBind(0x4001, to: CoreFixture.peer1).isSuccess)
        harness.stream = []
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(
            harness.stream == ["packet to client", "removeChannel", "closeRelaySocket", "session ended"],
            "\(harness.stream)")
    }
}
