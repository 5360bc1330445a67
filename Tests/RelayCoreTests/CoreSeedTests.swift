import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The core's random choices come from an injected seed: a run can be replayed exactly.
@Suite struct CoreSeedTests {
    /// Relayed ports and session ids of three allocations made with `seed`.
    private func run(seed: UInt64) throws -> [String] {
        let harness = CoreHarness(seed: seed)
        var seen: [String] = []
        for (i, client) in [CoreFixture.clientA, CoreFixture.clientB, .literal("192.0.2.3:40003")].enumerated() {
            let relayed = try #require(try harness.restClient(at: client, user: "u\(i)").allocate().xorRelayedAddress)
            let session = try #require(harness.allocation(of: client)).session
            seen.append("\(relayed.port)/\(session)")
        }
        return seen
    }

    @Test("The same seed gives the same relay ports and session ids; another seed other session ids")
    func replay() throws {
        let first = try run(seed: 42)
        #expect(try run(seed: 42) == first)
        let other = try run(seed: 43)
        #expect(other != first)
        #expect(Set(other.map { $0.split(separator: "/")[1] }).isDisjoint(with: first.map { $0.split(separator: "/")[1] }))
    }
}
