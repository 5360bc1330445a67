import Synchronization

/// The bytes a TCP allocation's pipes carried (RFC 6062 §5.5: after ConnectionBind, a data
/// connection and its peer connection exchange raw bytes), each direction apart.
///
/// A pipe runs on the loop thread its data connection landed on, which need not be the
/// allocation's (docs/tcp-relay.md), so the count is shared: one atomic word per direction, added
/// to by the pipes with one compare-and-exchange per read, read by the allocation's loop for the
/// admin API. No lock, no heap traffic per read.
///
/// When the allocation ends, its loop calls `end()`, which sets the word's top bit and returns the
/// counts at that instant. A pipe adds its bytes before it passes them on; an add that finds the
/// bit set is refused and the pipe closes without passing them. So the counts `end()` returns are
/// final: they are what the session summary logs, whichever thread runs the pipes and whenever
/// the mailbox message that closes them arrives.
///
/// A pipe spliced in the kernel (docs/tcp-relay.md, "In the kernel") passes bytes on without its
/// thread: it registers a `PipedKernelCount`, which `end()` asks, once the bit is set, to stop the
/// kernel's redirects and give what they carried that the pipe did not count yet.
public final class PipedTraffic: Sendable {
    private let toPeer = Atomic<UInt64>(0)
    private let toClient = Atomic<UInt64>(0)
    private let kernelCounts = Locked<[ObjectIdentifier: any PipedKernelCount]>([:])
    /// The top bit of a word: the allocation ended, nothing more is added.
    private static let ended: UInt64 = 1 << 63

    public init() {}

    /// Goes on from counts another process's pipes reached (a live upgrade, docs/live-upgrade.md).
    public init(bytesToPeer: UInt64, bytesToClient: UInt64) {
        toPeer.store(bytesToPeer & ~Self.ended, ordering: .relaxed)
        toClient.store(bytesToClient & ~Self.ended, ordering: .relaxed)
    }

    /// Counts `bytes` a pipe is about to pass on in `direction`; false, and nothing counted, once
    /// the allocation ended (the pipe then drops them and closes).
    @inline(__always)
    public func add(_ direction: BandwidthBudget.Direction, bytes: Int) -> Bool {
        switch direction {
        case .toPeer: return Self.add(UInt64(max(bytes, 0)), to: toPeer)
        case .toClient: return Self.add(UInt64(max(bytes, 0)), to: toClient)
        }
    }

    /// The bytes counted so far (packets stay 0: a pipe carries a stream, not messages), with
    /// what the kernel carried for spliced pipes since they last counted (the admin API's view;
    /// a system call or two per spliced pipe).
    public var current: TrafficCounters {
        var counters = TrafficCounters(
            bytesToPeer: toPeer.load(ordering: .relaxed) & ~Self.ended,
            bytesToClient: toClient.load(ordering: .relaxed) & ~Self.ended)
        guard !hasEnded else { return counters }
        for count in kernelCounts.withLock({ Array($0.values) }) {
            let uncounted = count.uncounted()
            counters.bytesToPeer &+= uncounted.bytesToPeer
            counters.bytesToClient &+= uncounted.bytesToClient
        }
        return counters
    }

    /// Whether `end()` was called.
    public var hasEnded: Bool { toPeer.load(ordering: .relaxed) & Self.ended != 0 }

    /// Follows a pipe spliced in the kernel until `forget`; false, following nothing, once the
    /// allocation ended.
    public func follow(_ count: any PipedKernelCount) -> Bool {
        kernelCounts.withLock { counts in
            guard !hasEnded else { return false }
            counts[ObjectIdentifier(count)] = count
            return true
        }
    }

    /// Stops following a spliced pipe (it counted its last bytes itself).
    public func forget(_ count: any PipedKernelCount) {
        _ = kernelCounts.withLock { $0.removeValue(forKey: ObjectIdentifier(count)) }
    }

    /// The allocation ended: refuses every later `add`, stops the kernel's redirects of its
    /// spliced pipes and adds what they carried uncounted, and returns the final counts.
    public func end() -> TrafficCounters {
        // The bit and the list together: a pipe follows before the end, and is asked, or sees
        // the end and does not splice.
        let (ended, spliced) = kernelCounts.withLock { counts in
            let peer = toPeer.bitwiseOr(Self.ended, ordering: .relaxed).oldValue & ~Self.ended
            let client = toClient.bitwiseOr(Self.ended, ordering: .relaxed).oldValue & ~Self.ended
            return (TrafficCounters(bytesToPeer: peer, bytesToClient: client), Array(counts.values))
        }
        var peer = ended.bytesToPeer
        var client = ended.bytesToClient
        for count in spliced {
            let uncounted = count.stopAndCount()
            toPeer.wrappingAdd(uncounted.bytesToPeer, ordering: .relaxed)
            toClient.wrappingAdd(uncounted.bytesToClient, ordering: .relaxed)
            peer &+= uncounted.bytesToPeer
            client &+= uncounted.bytesToClient
        }
        return TrafficCounters(bytesToPeer: peer, bytesToClient: client)
    }

    @inline(__always)
    private static func add(_ count: UInt64, to word: borrowing Atomic<UInt64>) -> Bool {
        var current = word.load(ordering: .relaxed)
        while true {
            guard current & ended == 0 else { return false }
            let (exchanged, original) = word.compareExchange(
                expected: current, desired: current &+ count, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }
}

/// A pipe spliced in the kernel, as its allocation's `PipedTraffic` sees it.
public protocol PipedKernelCount: AnyObject, Sendable {
    /// Stops the kernel's redirects and returns what they carried that was not counted yet
    /// (packets 0), marking it counted; from any thread, under the pipe's own lock, so each byte
    /// is counted once, here or by the pipe.
    func stopAndCount() -> TrafficCounters

    /// What the kernel carried that was not counted yet, leaving it uncounted.
    func uncounted() -> TrafficCounters
}

/// What a pipe of a TCP allocation charges its bytes to: the allocation's `max-bps` budget (nil
/// without `max-bps`) and its piped-traffic count. Handed to the pipe's thread with the peer
/// socket at ConnectionBind (RFC 6062 §5.4).
public struct PipeAccount: Sendable, Equatable {
    public let traffic: PipedTraffic
    public let budget: BandwidthBudget?

    public init(traffic: PipedTraffic, budget: BandwidthBudget?) {
        self.traffic = traffic
        self.budget = budget
    }

    /// The same allocation's objects.
    public static func == (a: Self, b: Self) -> Bool { a.traffic === b.traffic && a.budget === b.budget }
}
