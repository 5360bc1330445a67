import RelayCore
import Synchronization
import Testing

/// The piped traffic of a TCP allocation with pipes spliced in the kernel (docs/tcp-relay.md,
/// "In the kernel"): what the kernel carried joins the counts when the admin API asks and when
/// the allocation ends, and a pipe that would start splicing after the end is refused.
@Suite struct PipedKernelCountTests {
    /// A spliced pipe as `PipedTraffic` sees it: bytes "redirected" that it did not count yet.
    final class Spliced: PipedKernelCount {
        let state = Mutex<(uncounted: TrafficCounters, stopped: Int)>((TrafficCounters(), 0))

        func redirect(toPeer: UInt64, toClient: UInt64) {
            state.withLock {
                $0.uncounted.bytesToPeer += toPeer
                $0.uncounted.bytesToClient += toClient
            }
        }

        func stopAndCount() -> TrafficCounters {
            state.withLock { state in
                state.stopped += 1
                defer { state.uncounted = TrafficCounters() }
                return state.uncounted
            }
        }

        func uncounted() -> TrafficCounters { state.withLock { $0.uncounted } }
    }

    @Test("The admin view and the final counts include what the kernel carried; a forgotten pipe is not asked")
    func kernelBytesJoinTheCounts() {
        let piped = PipedTraffic()
        let spliced = Spliced()
        let gone = Spliced()
        #expect(piped.follow(spliced))
        #expect(piped.follow(gone))
        #expect(piped.add(.toPeer, bytes: 100))
        spliced.redirect(toPeer: 5000, toClient: 7000)
        gone.redirect(toPeer: 1, toClient: 1)
        piped.forget(gone)
        #expect(piped.current == TrafficCounters(bytesToPeer: 5100, bytesToClient: 7000))
        // Viewing counts nothing: the pipe still has it to count.
        #expect(spliced.uncounted() == TrafficCounters(bytesToPeer: 5000, bytesToClient: 7000))
        #expect(piped.end() == TrafficCounters(bytesToPeer: 5100, bytesToClient: 7000))
        #expect(spliced.state.withLock { $0.stopped } == 1 && gone.state.withLock { $0.stopped } == 0)
        #expect(piped.current == TrafficCounters(bytesToPeer: 5100, bytesToClient: 7000))
    }

    @Test("A pipe that would splice after the end is refused and never asked")
    func noSpliceAfterTheEnd() {
        let piped = PipedTraffic()
        #expect(piped.end() == TrafficCounters())
        let late = Spliced()
        #expect(!piped.follow(late))
        late.redirect(toPeer: 9, toClient: 9)
        #expect(piped.current == TrafficCounters())
        #expect(late.state.withLock { $0.stopped } == 0)
    }
}
