import Dispatch
import Synchronization
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

/// The inbox between real threads: two senders and an owner that takes only when woken.
@Suite struct HandOffInboxThreadTests {
    @Test("Every accepted packet arrives once and in its sender's order; no wake-up is lost")
    func concurrentSenders() throws {
        // Small enough that senders are refused now and then while the owner drains.
        let inbox = HandOffInbox(arenaBytes: 8 * 1024, maxRecords: 32)
        let wakes = DispatchSemaphore(value: 0)
        inbox.attach { wakes.signal() }
        let senders = 2
        let perSender = 20_000
        let accepted = Mutex([Int](repeating: 0, count: senders))
        let group = DispatchGroup()
        for sender in 0..<senders {
            DispatchQueue.global().async(group: group) {
                var count = 0
                for sequence in 0..<perSender {
                    let payload = [UInt8(sender)] + withUnsafeBytes(of: UInt32(sequence).bigEndian, Array.init)
                    let target = TransportAddress(ip: .literal("10.0.0.5"), port: UInt16(50000 + sender))
                    if payload.withUnsafeBytes({ inbox.post(to: target, from: target, payload: $0) }) { count += 1 }
                }
                accepted.withLock { $0[sender] = count }
            }
        }
        var received = [Int](repeating: 0, count: senders)
        var last = [Int](repeating: -1, count: senders)
        var disorder = 0
        // The owner takes only after a wake-up: a lost one would leave packets behind for good.
        while wakes.wait(timeout: .now() + .milliseconds(500)) == .success {
            guard let batch = inbox.take() else { continue }
            for record in batch.records {
                let bytes = Array(batch.arena[record.payload])
                let sender = Int(bytes[0])
                let sequence = bytes[1...].reduce(0) { $0 << 8 | Int($1) }
                if sequence <= last[sender] || record.target.port != UInt16(50000 + sender) { disorder += 1 }
                last[sender] = sequence
                received[sender] += 1
            }
            inbox.recycle(batch)
        }
        group.wait()
        inbox.detach()
        let sent = accepted.withLock { $0 }
        #expect(disorder == 0)
        #expect(received == sent)
        #expect(sent.allSatisfy { $0 > 0 })
        #expect(inbox.take() == nil)
    }
}
