import Synchronization

/// The `max-bps` byte budget of one allocation: at most `bytesPerSecond` payload bytes a second
/// in each direction, client to peer and peer to client counted apart (coturn's `max-bps`:
/// "input and output network streams are treated separately"). A packet over the budget of the
/// current second is dropped and counted (`bandwidth`), as a congested link would drop it.
///
/// A budget is a class of atomics, not state of the owning loop, because packets for one
/// allocation's client can be relayed by several loop threads: by its own loop (its relay socket,
/// a short-circuit on that loop) and by the others (the cross-loop short-circuit through
/// `RelayedAddressDirectory`). Each direction is one 64-bit word, the current second in the high
/// half and the bytes taken in it in the low half, updated with one compare-and-exchange: no
/// lock, no heap traffic per packet.
public final class BandwidthBudget: Sendable {
    /// The two directions of an allocation's traffic.
    public enum Direction: Sendable {
        /// Client to peer: Send indications and ChannelData from the client (RFC 8656 §11.2, §12.6).
        case toPeer
        /// Peer to client: what its relay socket (or a short-circuit) delivers (RFC 8656 §11.3, §12.7).
        case toClient
    }

    /// The bytes a second each direction may carry (at most `UInt32.max`).
    public let bytesPerSecond: Int
    private let toPeer = Atomic<UInt64>(0)
    private let toClient = Atomic<UInt64>(0)

    public init(bytesPerSecond: Int) {
        self.bytesPerSecond = min(max(bytesPerSecond, 0), Int(UInt32.max))
    }

    /// Takes `bytes` from `direction`'s budget for the second `now` (unix seconds); false, and
    /// nothing taken, when they do not fit in what is left of that second.
    @inline(__always)
    public func admit(_ direction: Direction, bytes: Int, now: Int64) -> Bool {
        switch direction {
        case .toPeer: return Self.take(bytes, from: toPeer, limit: bytesPerSecond, now: now)
        case .toClient: return Self.take(bytes, from: toClient, limit: bytesPerSecond, now: now)
        }
    }

    @inline(__always)
    private static func take(_ bytes: Int, from word: borrowing Atomic<UInt64>, limit: Int, now: Int64) -> Bool {
        let second = UInt64(truncatingIfNeeded: now) & 0xFFFF_FFFF
        let limit = UInt64(limit)
        let count = UInt64(max(bytes, 0))
        var current = word.load(ordering: .relaxed)
        while true {
            let used = current >> 32 == second ? current & 0xFFFF_FFFF : 0
            guard count <= limit && used <= limit - count else { return false }
            let next = second << 32 | (used + count)
            let (exchanged, original) = word.compareExchange(
                expected: current, desired: next, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// The bytes taken so far in the second `now` in `direction` (tests, metrics).
    public func used(_ direction: Direction, now: Int64) -> Int {
        let word = direction == .toPeer ? toPeer.load(ordering: .relaxed) : toClient.load(ordering: .relaxed)
        return word >> 32 == UInt64(truncatingIfNeeded: now) & 0xFFFF_FFFF ? Int(word & 0xFFFF_FFFF) : 0
    }
}
