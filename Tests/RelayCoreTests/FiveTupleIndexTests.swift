import StunCodec
import Testing

@testable import CoreTestSupport
@testable import RelayCore

/// `FiveTupleIndex`, the open-addressing index of a loop's allocations by 5-tuple (RFC 8656
/// §2.2), against a Dictionary kept beside it through inserts, removals and moves.
@Suite struct FiveTupleIndexTests {
    static func allocation(client port: UInt16, clientIP: String = "192.0.2.1") -> Allocation {
        let fiveTuple = FiveTuple(
            client: TransportAddress(ip: .literal(clientIP), port: port), server: .literal("10.0.0.1:3478"),
            transport: .udp)
        let relayed = TransportAddress.literal("10.0.0.5:50000")
        return Allocation(
            origin: ClientOrigin(fiveTuple: fiveTuple, socket: ClientSocket(descriptor: 3)),
            main: RelayEndpoint(
                relayedAddress: relayed, advertisedAddress: relayed, relaySocket: RelaySocket(descriptor: 4), expiry: 600),
            username: "u", key: Array(repeating: 1, count: 16), transactionID: .random(), now: 0,
            lease: AdmissionLease(user: "u", bytesPerSecond: 0))
    }

    /// Every key of `reference` is found with its allocation, and a few absent ones are not.
    static func check(_ index: FiveTupleIndex, _ reference: [FiveTuple: Allocation]) {
        #expect(index.count == reference.count)
        for (key, allocation) in reference { #expect(index[key] === allocation) }
        for port in UInt16(60000)..<60010 {
            #expect(index[allocation(client: port, clientIP: "198.51.100.9").origin.fiveTuple] == nil)
        }
        #expect(Set(index.all.map(ObjectIdentifier.init)) == Set(reference.values.map(ObjectIdentifier.init)))
    }

    @Test("Inserts, removals in random order and moves agree with a Dictionary; the table grows and shrinks")
    func agreesWithDictionary() {
        var generator = SystemRandomNumberGenerator()
        let index = FiveTupleIndex()
        var reference: [FiveTuple: Allocation] = [:]
        let all = (UInt16(1000)..<UInt16(4000)).map { Self.allocation(client: $0) }
        for allocation in all {
            index.insert(allocation)
            reference[allocation.origin.fiveTuple] = allocation
        }
        Self.check(index, reference)
        #expect(index.capacity >= 2 * all.count)
        for allocation in all.shuffled(using: &generator).prefix(2000) {
            index.remove(allocation)
            reference[allocation.origin.fiveTuple] = nil
        }
        Self.check(index, reference)
        // A move (RFC 8016): out under the old 5-tuple, in under the new.
        for (n, allocation) in reference.values.prefix(300).enumerated() {
            reference[allocation.origin.fiveTuple] = nil
            index.remove(allocation)
            allocation.origin = Self.allocation(client: UInt16(n + 10), clientIP: "203.0.113.4").origin
            index.insert(allocation)
            reference[allocation.origin.fiveTuple] = allocation
        }
        Self.check(index, reference)
        // Removing one twice, or one never listed, changes nothing.
        let gone = reference.values.first!
        index.remove(gone)
        reference[gone.origin.fiveTuple] = nil
        index.remove(gone)
        index.remove(Self.allocation(client: 9))
        Self.check(index, reference)
        for allocation in Array(reference.values) {
            index.remove(allocation)
            reference[allocation.origin.fiveTuple] = nil
        }
        Self.check(index, reference)
        #expect(index.capacity == FiveTupleIndex.minimumBuckets)
    }

    @Test("A walk of `all` is a snapshot: removing while walking neither skips nor repeats")
    func walkWhileRemoving() {
        let index = FiveTupleIndex()
        let all = (UInt16(1)..<UInt16(500)).map { Self.allocation(client: $0) }
        for allocation in all { index.insert(allocation) }
        var walked = 0
        for allocation in index.all {
            index.remove(allocation)
            walked += 1
        }
        #expect(walked == all.count)
        #expect(index.count == 0)
    }
}
