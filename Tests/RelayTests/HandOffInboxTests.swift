import Relay
import StunCodec
import Testing

/// The per-loop inbox of relay-to-relay packets for TCP/TLS clients (issue #6): payload layout,
/// batch swapping and the full-arena refusal that sends the packet through the socket instead.
@Suite struct HandOffInboxTests {
    let target = TransportAddress.literal("10.0.0.5:50001")
    let source = TransportAddress.literal("10.0.0.5:50002")

    private func post(_ inbox: HandOffInbox, _ payload: [UInt8]) -> Bool {
        payload.withUnsafeBytes { inbox.post(to: target, from: source, payload: $0) }
    }

    @Test("Posted payloads come back in order with peer headroom and tailroom around them")
    func layout() throws {
        let inbox = HandOffInbox()
        #expect(inbox.take() == nil)
        #expect(post(inbox, [1, 2, 3]))
        #expect(post(inbox, Array(repeating: 0xEE, count: 1200)))
        let batch = try #require(inbox.take())
        #expect(batch.records.count == 2)
        for record in batch.records {
            #expect(record.target == target && record.source == source)
            #expect(record.payload.lowerBound >= RelayCore.peerHeadroom)
            #expect(record.payload.upperBound + RelayCore.peerTailroom <= batch.arena.count)
        }
        #expect(Array(batch.arena[batch.records[0].payload]) == [1, 2, 3])
        #expect(Array(batch.arena[batch.records[1].payload]) == Array(repeating: 0xEE, count: 1200))
        #expect(batch.records[1].payload.lowerBound - RelayCore.peerHeadroom >= batch.records[0].payload.upperBound + RelayCore.peerTailroom)
        // Posts while the batch is out land in the other arena.
        #expect(post(inbox, [4]))
        inbox.recycle(batch)
        let next = try #require(inbox.take())
        #expect(next.records.count == 1 && Array(next.arena[next.records[0].payload]) == [4])
        inbox.recycle(next)
        #expect(inbox.take() == nil)
    }

    @Test("A full arena refuses, and takes packets again once the owner has drained it")
    func fullArena() throws {
        let inbox = HandOffInbox(arenaBytes: 4096, maxRecords: 2048)
        let payload = [UInt8](repeating: 7, count: 1000)
        var accepted = 0
        while post(inbox, payload) { accepted += 1 }
        #expect(accepted == 3)  // 48 + 1000 + 12 rounded up to 1072 bytes each
        let batch = try #require(inbox.take())
        #expect(batch.records.count == 3)
        #expect(post(inbox, payload))
        inbox.recycle(batch)
    }

    @Test("The record limit refuses before the arena fills")
    func recordLimit() throws {
        let inbox = HandOffInbox(arenaBytes: 64 * 1024, maxRecords: 4)
        for _ in 0..<4 { #expect(post(inbox, [1])) }
        #expect(!post(inbox, [1]))
        let batch = try #require(inbox.take())
        #expect(batch.records.count == 4)
        inbox.recycle(batch)
    }
}
