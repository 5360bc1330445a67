import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The TCP/TLS/DTLS connection limits: per-source shares that bind only once the node is half
/// full (docs/rate-limits.md).
@Suite struct ConnectionLimiterTests {
    static let office = IPAddress.literal("198.51.100.1")
    static let other = IPAddress.literal("198.51.100.2")
    static let defaults = ConnectionLimiter.Limits(configuration: RelayConfiguration())

    @Test("With the defaults, 2,000 pending connections from one address are all admitted")
    func officeBehindOneAddress() {
        let limiter = ConnectionLimiter(Self.defaults)
        let refused = (0..<2000).compactMap { _ in limiter.admit(Self.office) }
        #expect(refused.isEmpty)
        #expect(limiter.pending == 2000)
    }

    @Test("A flood from one address stops at half the pending bound; a second address still gets in")
    func floodLeavesRoomForOthers() {
        let limiter = ConnectionLimiter(Self.defaults)
        let admitted = (0..<5000).filter { _ in limiter.admit(Self.office) == nil }.count
        #expect(admitted == Self.defaults.maxPending / 2)
        #expect(limiter.admit(Self.office) == .pendingShare)
        let others = (0..<100).filter { _ in limiter.admit(Self.other) == nil }.count
        #expect(others == 100)
    }

    @Test("Under pressure, each of several sources is held to the bound over the sources plus one")
    func fairShareAmongSources() {
        let limiter = ConnectionLimiter(.init(maxTotal: 10_000, maxPending: 100))
        let sources = (1...3).map { IPAddress.literal("198.51.100.\($0)") }
        var admitted: [Int] = [0, 0, 0]
        for _ in 0..<100 {
            for (i, ip) in sources.enumerated() where limiter.admit(ip) == nil { admitted[i] += 1 }
        }
        // Past 50 pending, a source stops at 100 / (3 + 1) = 25.
        #expect(admitted == [25, 25, 25])
        #expect(limiter.admit(.literal("203.0.113.9")) == nil)
    }

    @Test("max-connections is shared the same way; connections that allocated are not pending")
    func totalShare() {
        let limiter = ConnectionLimiter(.init(maxTotal: 40, maxPending: 1000))
        for _ in 0..<20 {
            #expect(limiter.admit(Self.office) == nil)
            limiter.allocated(Self.office)
        }
        #expect(limiter.pending == 0)
        // Half of max-connections is taken: the office holds 20 = 40 / (1 + 1).
        #expect(limiter.admit(Self.office) == .totalShare)
        #expect(limiter.admit(Self.other) == nil)
    }

    @Test("A connection whose allocations all ended is pending again; closing it gives the slot back")
    func pendingAgain() {
        let limiter = ConnectionLimiter(.init(maxTotal: 100, maxPending: 4))
        #expect(limiter.admit(Self.office) == nil)
        limiter.allocated(Self.office)
        #expect(limiter.pending == 0)
        limiter.pendingAgain(Self.office)
        #expect(limiter.pending == 1)
        #expect(limiter.admit(Self.office) == nil)
        // 2 of 4 pending: the office is at 4 / (1 + 1).
        #expect(limiter.admit(Self.office) == .pendingShare)
        limiter.release(Self.office, pending: true)
        limiter.release(Self.office, pending: true)
        #expect(limiter.pending == 0 && limiter.total == 0)
    }

    @Test("Hard caps an operator sets still apply below the pressure mark")
    func hardCaps() {
        let limiter = ConnectionLimiter(.init(maxTotal: 100, maxPerIP: 3, maxPending: 100, maxPendingPerIP: 2))
        #expect(limiter.admit(Self.office) == nil)
        #expect(limiter.admit(Self.office) == nil)
        #expect(limiter.admit(Self.office) == .pendingPerIPLimit)
        limiter.allocated(Self.office)
        #expect(limiter.admit(Self.office) == nil)
        #expect(limiter.admit(Self.office) == .perIPLimit)
    }
}
