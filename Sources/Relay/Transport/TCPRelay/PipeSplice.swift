import CRelayFastPath
import FastPath
import Glibc
import RelayCore

/// An RFC 6062 pipe whose two sockets are in the kernel's sockmap (docs/tcp-relay.md, "In the
/// kernel"): the pair of slots, and relayd's half of each direction's protocol with the
/// program. A direction (`Side`) runs from a source socket to a target socket; the program
/// redirects the source's bytes to the target, or passes them to relayd, which reads them from
/// the source and writes them to the target itself, but only once every byte redirected before
/// them left the kernel's queue for the target's send queue (`drained`), so no byte overtakes
/// another. The program redirects again once relayd read and wrote everything it passed (the
/// `gate`).
///
/// The pipe's loop thread owns the sides; the redirected-byte counts (what the allocation's
/// `PipedTraffic` has of them) are under a lock, because the allocation's end, on its own loop,
/// stops the redirects and counts the rest itself (`stopAndCount`). No heap allocation per
/// byte relayed: a side's buffer is made once, at its first pass.
final class PipeSplice: PipedKernelCount, @unchecked Sendable {
    struct Side {
        /// The source socket's slot (its counts and control entry).
        var slot: UInt32
        /// The target's written bytes when the splice began.
        var targetBase: UInt64
        /// Bytes relayd wrote to the target since.
        var written: UInt64 = 0
        /// Bytes relayd read from the source since (all of them passed by the program).
        var read: UInt64 = 0
        /// Bytes read and not yet written, at `start` of the pipe's buffer for this side.
        var start = 0
        var count = 0
        /// The source ended (its FIN read, with every passed byte before it).
        var ended = false
        /// Redirected bytes counted in the loop's metrics.
        var inMetrics: UInt64 = 0
    }

    struct Counted {
        /// The pair's first slot, once the sockets are in the sockmap.
        var first: UInt32?
        /// Redirected bytes counted in `traffic`, each direction.
        var toPeer: UInt64 = 0
        var toClient: UInt64 = 0
        /// The allocation's end stopped the redirects and counted the rest.
        var stopped = false
    }

    let kernel: KernelSplice
    let traffic: PipedTraffic
    /// Towards the peer (the client's socket is the source), then towards the client; empty
    /// until `start` succeeded.
    var sides: [Side] = []
    /// One read's worth per side, for what the program passed (made at the first pass).
    var buffers: [UnsafeMutableRawBufferPointer?] = [nil, nil]
    private let counted = Locked<Counted>(Counted())

    /// Bytes a side reads at a time of what the program passed.
    static let readBytes = 64 * 1024

    init(kernel: KernelSplice, traffic: PipedTraffic) {
        self.kernel = kernel
        self.traffic = traffic
    }

    var first: UInt32 { sides[0].slot }

    /// Puts the sockets in the sockmap, unless the allocation ended: false when it did, or no
    /// pair is free. Under the lock, so the allocation's end either sees the pair or stops this.
    func start(client: Int32, peer: Int32, clientBase: UInt64, peerBase: UInt64, limit: UInt32) -> Bool {
        let first = counted.withLock { counted -> UInt32? in
            guard !counted.stopped, !traffic.hasEnded else { return nil }
            counted.first = kernel.splice(client: client, peer: peer, limit: limit)
            return counted.first
        }
        guard let first else { return false }
        sides = [Side(slot: first, targetBase: peerBase), Side(slot: first + 1, targetBase: clientBase)]
        return true
    }

    static func index(_ direction: BandwidthBudget.Direction) -> Int { direction == .toPeer ? 0 : 1 }

    func buffer(_ side: Int) -> UnsafeMutableRawBufferPointer {
        if let buffer = buffers[side] { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readBytes, alignment: 16)
        buffers[side] = buffer
        return buffer
    }

    /// Whether every byte the program redirected towards `side`'s target is in the target's send
    /// queue: its written bytes since the splice, less relayd's own, equal the program's count.
    func drained(_ side: Int, target: Int32) -> Bool {
        guard let written = KernelSplice.writtenBytes(target), let counts = kernel.counts(slot: sides[side].slot)
        else { return false }
        return written &- sides[side].targetBase &- sides[side].written == counts.redirected
    }

    /// Bytes the program passed from `side`'s source so far; nil if the map cannot be read.
    func passed(_ side: Int) -> UInt64? { kernel.counts(slot: sides[side].slot)?.passed }

    /// Lets the program redirect `side` again once relayd holds nothing of it: every byte passed
    /// is read and written on.
    func reopen(_ side: Int) {
        guard sides[side].count == 0, let passed = passed(side), passed == sides[side].read else { return }
        let control = kernel.control(slot: sides[side].slot)
        if relayd_splice_load_gate(control) != passed { relayd_splice_store_gate(control, passed) }
    }

    /// Tells the program what relayd wrote to `side`'s target (its in-flight count).
    func wrote(_ bytes: Int, _ side: Int) {
        sides[side].written &+= UInt64(bytes)
        relayd_splice_store_written(kernel.control(slot: sides[side].slot), sides[side].written)
    }

    /// Counts in `traffic` what the program redirected since the last count; false once the
    /// allocation ended (its end counted the rest). The new bytes of each direction are returned
    /// for the loop's metrics.
    func count() -> (ended: Bool, toPeer: UInt64, toClient: UInt64) {
        guard !sides.isEmpty else { return (false, 0, 0) }
        let toPeer = kernel.counts(slot: sides[0].slot)?.redirected
        let toClient = kernel.counts(slot: sides[1].slot)?.redirected
        let ended = counted.withLock { counted -> Bool in
            guard !counted.stopped else { return true }
            if let toPeer, toPeer > counted.toPeer {
                guard traffic.add(.toPeer, bytes: Int(toPeer - counted.toPeer)) else { return true }
                counted.toPeer = toPeer
            }
            if let toClient, toClient > counted.toClient {
                guard traffic.add(.toClient, bytes: Int(toClient - counted.toClient)) else { return true }
                counted.toClient = toClient
            }
            return false
        }
        let metrics = (toPeer: (toPeer ?? sides[0].inMetrics) &- sides[0].inMetrics,
                       toClient: (toClient ?? sides[1].inMetrics) &- sides[1].inMetrics)
        if let toPeer { sides[0].inMetrics = toPeer }
        if let toClient { sides[1].inMetrics = toClient }
        return (ended, metrics.toPeer, metrics.toClient)
    }

    func stopAndCount() -> TrafficCounters {
        counted.withLock { counted in
            counted.stopped = true
            guard let first = counted.first else { return TrafficCounters() }
            // The program reads the limit under its counters' lock, which the reads below take:
            // a redirect was either counted before them, or sees 0 and passes.
            relayd_splice_store_limit(kernel.control(slot: first), 0)
            relayd_splice_store_limit(kernel.control(slot: first + 1), 0)
            var uncounted = TrafficCounters()
            if let redirected = kernel.counts(slot: first)?.redirected, redirected > counted.toPeer {
                uncounted.bytesToPeer = redirected - counted.toPeer
                counted.toPeer = redirected
            }
            if let redirected = kernel.counts(slot: first + 1)?.redirected, redirected > counted.toClient {
                uncounted.bytesToClient = redirected - counted.toClient
                counted.toClient = redirected
            }
            return uncounted
        }
    }

    func uncounted() -> TrafficCounters {
        counted.withLock { counted in
            guard !counted.stopped, let first = counted.first else { return TrafficCounters() }
            var uncounted = TrafficCounters()
            if let redirected = kernel.counts(slot: first)?.redirected, redirected > counted.toPeer {
                uncounted.bytesToPeer = redirected - counted.toPeer
            }
            if let redirected = kernel.counts(slot: first + 1)?.redirected, redirected > counted.toClient {
                uncounted.bytesToClient = redirected - counted.toClient
            }
            return uncounted
        }
    }

    /// Frees the buffers (the pipe's sockets close with it).
    func free() {
        for case let buffer? in buffers { buffer.deallocate() }
        buffers = [nil, nil]
    }
}
