import CRelayFastPath
import FastPath
import Glibc
import RelayCore

/// An RFC 6062 pipe whose sockets are in the kernel's sockmap (docs/tcp-relay.md, "In the
/// kernel"): its slots, and relayd's half of each direction's protocol with the program. A
/// direction (`Side`) runs from a source socket to a target socket; the program redirects the
/// source's bytes to the target, or passes them to relayd, which reads them from the source and
/// writes them to the target itself, but only once every byte redirected before them left the
/// kernel's queue for the target's send queue (`drained`), so no byte overtakes another. The
/// program redirects again once relayd read and wrote everything it passed (the `gate`).
///
/// The pipe's loop thread owns the sides; the redirected-byte counts (what the allocation's
/// `PipedTraffic` has of them) are under a lock, because the allocation's end, on its own loop,
/// stops the redirects and counts the rest itself (`stopAndCount`). No heap allocation per
/// byte relayed: a side's buffer is made once, the first time its target cannot take at once
/// what relayd read.
final class PipeSplice: PipedKernelCount, @unchecked Sendable {
    struct Side {
        /// The source socket's slot (its counts and control entry).
        var slot: UInt32
        /// Whether the source is in the sockmap (the peer's may have failed to go in: then
        /// the program sees none of its bytes, and relayd reads them as without the splice).
        var inMap: Bool
        /// The target's written bytes when the splice began.
        var targetBase: UInt64
        /// Bytes relayd wrote to the target since.
        var written: UInt64 = 0
        /// Bytes relayd read from the source since.
        var read: UInt64 = 0
        /// Bytes read and not yet written, at `start` of the side's buffer.
        var start = 0
        var count = 0
        /// The source's stream ended (its end read, after every byte passed before it).
        var ended = false
        /// The side waits on the kernel (no event will say when): its queue to the target to
        /// drain, or passed bytes to reach the source's socket before its end.
        var waits = false
        /// Redirected bytes counted in the loop's metrics.
        var inMetrics: UInt64 = 0
        /// The program's redirected count when the kernel's queue to the target was last seen
        /// drained: while it stays so, nothing new can be in that queue.
        var drainedAt: UInt64 = 0
    }

    struct Counted {
        /// The pair's first slot while the sockets are in the sockmap; nil before and after.
        var first: UInt32?
        /// Redirected bytes counted in `traffic`, each direction.
        var toPeer: UInt64 = 0
        var toClient: UInt64 = 0
        /// The allocation's end stopped the redirects and counted the rest.
        var stopped = false
        /// Counted at the pipe's close after the allocation ended, for its end to take.
        var leftover = TrafficCounters()
    }

    let kernel: KernelSplice
    let traffic: PipedTraffic
    /// Towards the peer (the client's socket is the source), then towards the client; empty
    /// until `start` succeeded.
    var sides: [Side] = []
    private(set) var spliced: KernelSplice.Spliced?
    /// Per side, what relayd read and its target could not take yet (made when first needed).
    var buffers: [UnsafeMutableRawBufferPointer?] = [nil, nil]
    private let counted = Locked<Counted>(Counted())
    /// Retransmitted bytes the program took out, both ways, counted in the loop's metrics.
    private var oldInMetrics: UInt64 = 0
    /// The next wait on the kernel, doubled while nothing moves (2 ms up to 64 ms).
    var waitMicroseconds = PipeSplice.firstWait

    static let firstWait = 2000
    static let longestWait = 64_000

    init(kernel: KernelSplice, traffic: PipedTraffic) {
        self.kernel = kernel
        self.traffic = traffic
    }

    var first: UInt32 { sides[0].slot }

    /// Puts the sockets in the sockmap and opens the redirects, unless the allocation ended:
    /// false when it did, or when the client's socket cannot go in. Under the lock, so the
    /// allocation's end either sees the pair or stops this.
    func start(client: Int32, peer: Int32, clientBase: UInt64, peerBase: UInt64, limit: UInt32) -> Bool {
        let spliced = counted.withLock { counted -> KernelSplice.Spliced? in
            guard !counted.stopped, !traffic.hasEnded, let spliced = kernel.splice(client: client, peer: peer)
            else { return nil }
            counted.first = spliced.first
            // With one socket out, the program only passes: relayd reads both sides itself.
            if spliced.peerInserted { kernel.open(first: spliced.first, limit: limit) }
            return spliced
        }
        guard let spliced else { return false }
        self.spliced = spliced
        sides = [
            Side(slot: spliced.first, inMap: true, targetBase: peerBase),
            Side(slot: spliced.first + 1, inMap: spliced.peerInserted, targetBase: clientBase),
        ]
        return true
    }

    func buffer(_ side: Int) -> UnsafeMutableRawBufferPointer {
        if let buffer = buffers[side] { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferBytes, alignment: 16)
        buffers[side] = buffer
        return buffer
    }

    /// Bytes a side holds at most (one read of what the program passed).
    static let bufferBytes = 64 * 1024

    /// Whether every byte the program redirected towards `side`'s target is in the target's send
    /// queue: its written bytes since the splice, less relayd's own, equal the program's count.
    func drained(_ side: Int, target: Int32) -> Bool {
        guard sides[side].inMap else { return true }
        guard let redirected = kernel.counts(slot: sides[side].slot)?.redirected else { return false }
        if redirected == sides[side].drainedAt { return true }
        guard let written = KernelSplice.writtenBytes(target),
            written &- sides[side].targetBase &- sides[side].written == redirected
        else { return false }
        sides[side].drainedAt = redirected
        return true
    }

    /// Whether relayd read every byte the program passed from `side`'s source (always, for a
    /// source outside the sockmap).
    func readAllPassed(_ side: Int) -> Bool {
        guard sides[side].inMap else { return true }
        return kernel.counts(slot: sides[side].slot)?.passed == sides[side].read
    }

    /// Lets the program redirect `side` again once relayd holds nothing of it: every byte passed
    /// is read and written on.
    func reopen(_ side: Int) {
        guard sides[side].inMap, sides[side].count == 0,
            let passed = kernel.counts(slot: sides[side].slot)?.passed, passed == sides[side].read
        else { return }
        let control = kernel.control(slot: sides[side].slot)
        if relayd_splice_load_gate(control) != passed { relayd_splice_store_gate(control, passed) }
    }

    /// Tells the program what relayd wrote to `side`'s target (its count of the target's queue).
    func wrote(_ bytes: Int, _ side: Int) {
        sides[side].written &+= UInt64(bytes)
        relayd_splice_store_written(kernel.control(slot: sides[side].slot), sides[side].written)
    }

    /// What the program redirected each way from the pair at `first` (nil where the map cannot
    /// be read).
    private func redirected(_ first: UInt32) -> (toPeer: UInt64?, toClient: UInt64?) { Self.redirected(counts(first)) }

    private static func redirected(_ both: (KernelSplice.Counts?, KernelSplice.Counts?))
        -> (toPeer: UInt64?, toClient: UInt64?)
    {
        (both.0?.redirected, both.1?.redirected)
    }

    /// Both slots' counts (nil where the map cannot be read).
    private func counts(_ first: UInt32)
        -> (KernelSplice.Counts?, KernelSplice.Counts?)
    {
        (kernel.counts(slot: first), kernel.counts(slot: first + 1))
    }

    /// The retransmitted bytes the program took out (docs/tcp-relay.md, "Retransmitted bytes")
    /// that the loop's metrics do not have yet, both ways.
    private func oldDelta(_ counts: (KernelSplice.Counts?, KernelSplice.Counts?)) -> UInt64 {
        let total = (counts.0?.old ?? 0) &+ (counts.1?.old ?? 0)
        guard total > oldInMetrics else { return 0 }
        defer { oldInMetrics = total }
        return total - oldInMetrics
    }

    /// The bytes of `totals` that `counted` does not have yet, which it takes.
    private static func take(_ totals: (toPeer: UInt64?, toClient: UInt64?), into counted: inout Counted)
        -> TrafficCounters
    {
        var new = TrafficCounters()
        if let toPeer = totals.toPeer, toPeer > counted.toPeer {
            new.bytesToPeer = toPeer - counted.toPeer
            counted.toPeer = toPeer
        }
        if let toClient = totals.toClient, toClient > counted.toClient {
            new.bytesToClient = toClient - counted.toClient
            counted.toClient = toClient
        }
        return new
    }

    /// Counts in `traffic` what the program redirected since the last count; `ended` once the
    /// allocation ended (its end counted the rest). The new bytes of each direction are returned
    /// for the loop's metrics, with the retransmitted bytes taken out since the last count.
    func count() -> (ended: Bool, toPeer: UInt64, toClient: UInt64, old: UInt64) {
        guard !sides.isEmpty else { return (false, 0, 0, 0) }
        let both = counts(first)
        let totals = Self.redirected(both)
        let ended = counted.withLock { counted -> Bool in
            guard !counted.stopped else { return true }
            var next = counted
            let new = Self.take(totals, into: &next)
            if new.bytesToPeer > 0 {
                guard traffic.add(.toPeer, bytes: Int(new.bytesToPeer)) else { return true }
                counted.toPeer = next.toPeer
            }
            if new.bytesToClient > 0 {
                guard traffic.add(.toClient, bytes: Int(new.bytesToClient)) else { return true }
                counted.toClient = next.toClient
            }
            return false
        }
        return (ended, metricsDelta(0, totals.toPeer), metricsDelta(1, totals.toClient), oldDelta(both))
    }

    private func metricsDelta(_ side: Int, _ redirected: UInt64?) -> UInt64 {
        guard let redirected, redirected > sides[side].inMetrics else { return 0 }
        defer { sides[side].inMetrics = redirected }
        return redirected - sides[side].inMetrics
    }

    /// The pipe closes: its sockets leave the sockmap, the last redirects are counted (kept for
    /// the allocation's end if it already refuses counts), and the pair is freed. Returns the
    /// new bytes for the loop's metrics, with the retransmitted bytes taken out since the last
    /// count.
    func finish() -> (toPeer: UInt64, toClient: UInt64, old: UInt64) {
        guard let spliced else { return (0, 0, 0) }
        kernel.unsplice(spliced)
        let both = counts(spliced.first)
        let totals = Self.redirected(both)
        counted.withLock { counted in
            counted.first = nil
            guard !counted.stopped else { return }
            let new = Self.take(totals, into: &counted)
            if new.bytesToPeer > 0, !traffic.add(.toPeer, bytes: Int(new.bytesToPeer)) {
                counted.leftover.bytesToPeer &+= new.bytesToPeer
            }
            if new.bytesToClient > 0, !traffic.add(.toClient, bytes: Int(new.bytesToClient)) {
                counted.leftover.bytesToClient &+= new.bytesToClient
            }
        }
        traffic.forget(self)
        kernel.release(first: spliced.first)
        self.spliced = nil
        return (metricsDelta(0, totals.toPeer), metricsDelta(1, totals.toClient), oldDelta(both))
    }

    func stopAndCount() -> TrafficCounters {
        counted.withLock { counted in
            guard !counted.stopped else { return TrafficCounters() }
            counted.stopped = true
            guard let first = counted.first else { return counted.leftover }
            // The program reads the limit under its counters' lock, which the reads below take:
            // a redirect was either counted before them, or sees 0 and passes.
            relayd_splice_store_limit(kernel.control(slot: first), 0)
            relayd_splice_store_limit(kernel.control(slot: first + 1), 0)
            return counted.leftover + Self.take(redirected(first), into: &counted)
        }
    }

    func uncounted() -> TrafficCounters {
        counted.withLock { counted in
            guard !counted.stopped else { return TrafficCounters() }
            guard let first = counted.first else { return counted.leftover }
            var copy = counted
            return counted.leftover + Self.take(redirected(first), into: &copy)
        }
    }

    /// Whether the program passed a segment of `side`'s source with old bytes it could not take
    /// out: relayd would relay them twice.
    func broken(_ side: Int) -> Bool { sides[side].inMap && kernel.broken(slot: sides[side].slot) }

    /// Frees the buffers (the pipe's sockets close with it).
    func free() {
        for case let buffer? in buffers { buffer.deallocate() }
        buffers = [nil, nil]
    }
}
