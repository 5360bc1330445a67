import StunCodec
import Synchronization

/// RESERVATION-TOKENs of every loop thread (RFC 8656 §7.2, §18.10). The Allocate carrying a
/// token comes from another client socket, which SO_REUSEPORT may steer to another thread than
/// the one that reserved the port, so the tokens are shared; touched only by Allocate and sweeps.
public final class ReservationTable: Sendable {
    /// A port held by EVEN-PORT's R bit for a later Allocate with RESERVATION-TOKEN.
    public struct Entry: Sendable, Hashable {
        public var address: IPAddress
        public var port: UInt16
        public var expiry: Int64
    }

    private let entries = Locked<[UInt64: Entry]>([:])

    public init() {}

    func insert(_ token: UInt64, _ entry: Entry) { entries.withLock { $0[token] = entry } }

    /// Whether `token` still holds its port (no Allocate took it).
    func contains(_ token: UInt64) -> Bool { entries.withLock { $0[token] != nil } }

    /// Removes and returns the entry for `token`: a token is good for one Allocate.
    func take(_ token: UInt64) -> Entry? { entries.withLock { $0.removeValue(forKey: token) } }
}
