import Dispatch
import Foundation
import RelayCore
import StunCodec
import Synchronization
import Testing

@testable import CoreTestSupport
@testable import Relay

/// `EventLoop`, `StreamTransport` and `StreamConnection` on real threads with real sockets: two
/// loops, TURN-over-TCP clients on each, relaying to each other across the loops while the test
/// closes connections and stops loops under them (docs/architecture.md, "What is shared between
/// loops"). A crash, a hang or a lost or damaged packet fails the test.
@Suite(.serialized) struct LoopConcurrencyTests {
    /// 100-byte payloads numbered in their first 4 bytes, the rest a pattern of that number.
    static func payload(_ sequence: Int) -> [UInt8] {
        var bytes = withUnsafeBytes(of: UInt32(sequence).bigEndian, Array.init)
        bytes += (0..<96).map { UInt8(truncatingIfNeeded: sequence &+ $0) }
        return bytes
    }

    /// Reads ChannelData frames on `channel` until `count` arrived in order and intact, or the
    /// connection is quiet for the client's timeout; returns how many arrived in order.
    static func receive(_ count: Int, on channel: UInt16, from client: StreamTestClient) -> Int {
        var received = 0
        while received < count, let frame = client.readFrame() {
            guard frame.count >= 4, UInt16(frame[0]) << 8 | UInt16(frame[1]) == channel else { continue }
            let length = Int(frame[2]) << 8 | Int(frame[3])
            guard length == 100, Array(frame[4..<104]) == payload(received) else { return received }
            received += 1
        }
        return received
    }

    /// Two clients, A on loop 0 and B on loop 1, each with a channel to the other's relayed address.
    static func crossLoopPair(_ loops: RunningLoops) throws
        -> (a: StreamTestClient, b: StreamTestClient, turnA: TurnTestClient, turnB: TurnTestClient)
    {
        let (a, turnA) = try loops.client(on: 0)
        let (b, turnB) = try loops.client(on: 1)
        let relayedA = try #require(try turnA.allocate().xorRelayedAddress)
        let relayedB = try #require(try turnB.allocate().xorRelayedAddress)
        #expect(try turnA.channelBind(0x4000, to: relayedB).isSuccess)
        #expect(try turnB.channelBind(0x4001, to: relayedA).isSuccess)
        return (a, b, turnA, turnB)
    }

    @Test("Both loops write into each other's connections at once: every packet arrives, in order and intact")
    func concurrentCrossLoopWrites() throws {
        let loops = try RunningLoops()
        defer { #expect(loops.stopAll(), "a loop did not stop") }
        let (a, b, _, _) = try Self.crossLoopPair(loops)
        let count = 3000
        let received = Locked<[Int]>([0, 0])
        let group = DispatchGroup()
        // A sends on its channel 0x4000 and reads B's packets there; B likewise on 0x4001.
        let sides: [(client: StreamTestClient, channel: UInt16)] = [(a, 0x4000), (b, 0x4001)]
        for (index, side) in sides.enumerated() {
            DispatchQueue.global().async(group: group) {
                let n = Self.receive(count, on: side.channel, from: side.client)
                received.withLock { $0[index] = n }
            }
            DispatchQueue.global().async(group: group) {
                for sequence in 0..<count where !side.client.sendChannelData(side.channel, Self.payload(sequence)) {
                    break
                }
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(received.withLock { $0 } == [count, count])
    }

    @Test("A connection reset while another loop writes into it: the writer and both loops carry on")
    func resetDuringCrossLoopWrites() throws {
        let loops = try RunningLoops()
        defer { #expect(loops.stopAll(), "a loop did not stop") }
        let (a, b, turnA, _) = try Self.crossLoopPair(loops)
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            for sequence in 0..<20_000 where !a.sendChannelData(0x4000, Self.payload(sequence)) { break }
        }
        #expect(Self.receive(200, on: 0x4001, from: b) == 200)
        b.reset()
        #expect(writer.wait(timeout: .now() + 60) == .success)
        // Loop 0 still answers A; loop 1 still takes a new client.
        #expect(try turnA.refresh(lifetime: 600).isSuccess)
        let (_, turnC) = try loops.client(on: 1)
        #expect(try turnC.allocate().isSuccess)
    }

    @Test("A loop shuts down while another loop still writes into its connection: no crash, the other loop goes on")
    func shutdownWhileAnotherLoopHoldsTheConnection() throws {
        let loops = try RunningLoops()
        defer { #expect(loops.stopAll(), "a loop did not stop") }
        let (a, b, turnA, _) = try Self.crossLoopPair(loops)
        let stopWriting = Atomic<Bool>(false)
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            var sequence = 0
            while !stopWriting.load(ordering: .relaxed), a.sendChannelData(0x4000, Self.payload(sequence)) {
                sequence += 1
            }
        }
        #expect(Self.receive(200, on: 0x4001, from: b) == 200)
        #expect(loops.stop(1), "loop 1 did not stop")
        // Loop 0 keeps relaying towards the closed connection for a while, then A is answered.
        Thread.sleep(forTimeInterval: 0.3)
        stopWriting.store(true, ordering: .relaxed)
        #expect(writer.wait(timeout: .now() + 30) == .success)
        #expect(try turnA.refresh(lifetime: 600).isSuccess)
    }
}
