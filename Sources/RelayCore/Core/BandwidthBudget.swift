import Synchronization

/// The `max-bps` byte budget of one allocation: at most `bytesPerSecond` payload bytes a second
/// in each direction, client to peer and peer to client counted apart (coturn's `max-bps`:
/// "input and output network streams are treated separately"). A packet over the budget of the
/// current second is dropped and counted (`bandwidth`), as a congested link would drop it; a TCP
/// allocation's pipe (RFC 6062 §5.5), which must not lose a byte, takes a `grant` instead and
/// stops reading until the next second (docs/tcp-relay.md).
///
/// A budget is a class of atomics, not state of the owning loop, because packets for one
/// allocation's client can be relayed by several loop threads: by its own loop (its relay socket,
/// a short-circuit on that loop) and by the others (the cross-loop short-circuit through
/// `RelayedAddressDirectory`, a TCP allocation's pipes on the thread of their data connection).
/// Each direction is one 64-bit word, the current second in the high half and the bytes taken in
/// it in the low half, updated with one compare-and-exchange: no lock, no heap traffic per packet.
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

    /// Takes `bytes` from `direction`'s budget for the second `now` (monotonic seconds, docs/clocks.md); false, and
    /// nothing taken, when they do not fit in what is left of that second.
    ///
    /// Loops read the clock at different moments, so a packet stamped with a second just before
    /// the stored one is charged to the stored second (its budget is never reset backwards);
    /// a clock stepped back by more than a few seconds starts a new window at once.
    @inline(__always)
    public func admit(_ direction: Direction, bytes: Int, now: Int64) -> Bool {
        switch direction {
        case .toPeer: return Self.take(bytes, from: toPeer, limit: bytesPerSecond, now: now) != nil
        case .toClient: return Self.take(bytes, from: toClient, limit: bytesPerSecond, now: now) != nil
        }
    }

    /// Takes as many of `bytes` as fit in what is left of `direction`'s budget for the second
    /// `now`, and returns how many: 0 when the second's budget is spent. For a byte stream that
    /// must not lose a byte, a TCP allocation's pipe (RFC 6062 §5.5): it reads or forwards only
    /// what was granted and stops reading the sending side until the next second
    /// (docs/tcp-relay.md), where a datagram over the budget would be dropped.
    @inline(__always)
    public func grant(_ direction: Direction, upTo bytes: Int, now: Int64) -> Int {
        switch direction {
        case .toPeer: return Int(Self.take(bytes, from: toPeer, limit: bytesPerSecond, now: now, partial: true) ?? 0)
        case .toClient: return Int(Self.take(bytes, from: toClient, limit: bytesPerSecond, now: now, partial: true) ?? 0)
        }
    }

    /// Gives back `bytes` that `admit` took at `now` for a packet that was not sent after all
    /// (a connection refused it, or it went another way that charges it again).
    public func refund(_ direction: Direction, bytes: Int, now: Int64) {
        switch direction {
        case .toPeer: Self.giveBack(bytes, to: toPeer, now: now)
        case .toClient: Self.giveBack(bytes, to: toClient, now: now)
        }
    }

    /// The bytes taken so far in the second `now` in `direction` (tests, metrics).
    public func used(_ direction: Direction, now: Int64) -> Int {
        let word = direction == .toPeer ? toPeer.load(ordering: .relaxed) : toClient.load(ordering: .relaxed)
        return word >> 32 == Self.second(now) ? Int(word & 0xFFFF_FFFF) : 0
    }

    @inline(__always)
    private static func second(_ now: Int64) -> UInt64 { UInt64(truncatingIfNeeded: now) & 0xFFFF_FFFF }

    /// The window a packet at `second` belongs to given the stored word, and what it has used.
    @inline(__always)
    private static func window(_ word: UInt64, at second: UInt64) -> (second: UInt64, used: UInt64) {
        let stored = word >> 32
        if stored == second { return (second, word & 0xFFFF_FFFF) }
        if stored > second && stored - second <= 2 { return (stored, word & 0xFFFF_FFFF) }
        return (second, 0)
    }

    /// Takes bytes from the second `now`'s window of `word`: all of `bytes` or none, or with
    /// `partial` as many as are left. Returns how many were taken; nil when none could be (an
    /// exact take that does not fit).
    @inline(__always)
    private static func take(
        _ bytes: Int, from word: borrowing Atomic<UInt64>, limit: Int, now: Int64, partial: Bool = false
    ) -> UInt64? {
        let limit = UInt64(limit)
        let wanted = UInt64(max(bytes, 0))
        var current = word.load(ordering: .relaxed)
        while true {
            let (second, used) = window(current, at: second(now))
            let room = used < limit ? limit - used : 0
            let granted = partial ? min(wanted, room) : wanted
            guard granted <= room, !(partial && granted == 0) else { return nil }
            let (exchanged, original) = word.compareExchange(
                expected: current, desired: second << 32 | (used + granted), ordering: .relaxed)
            if exchanged { return granted }
            current = original
        }
    }

    private static func giveBack(_ bytes: Int, to word: borrowing Atomic<UInt64>, now: Int64) {
        let count = UInt64(max(bytes, 0))
        var current = word.load(ordering: .relaxed)
        while true {
            let (second, used) = window(current, at: second(now))
            // A window that has moved on since the packet was charged keeps its count.
            guard second == current >> 32, used > 0 else { return }
            let (exchanged, original) = word.compareExchange(
                expected: current, desired: second << 32 | (used - min(used, count)), ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
