import StunCodec

/// A named secret of the node (docs/state-journal.md, "Keys record"): the nonce key, mobility
/// ticket keys, the DTLS cookie secret, TLS session ticket keys. Opaque to the journal.
public struct JournalKey: Sendable, Equatable {
    public var name: String
    public var bytes: [UInt8]

    public init(name: String, bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }
}

/// A port EVEN-PORT's R bit holds for a later Allocate with its RESERVATION-TOKEN
/// (RFC 8656 §7.2, §18.10), and when the hold ends.
public struct JournalReservation: Sendable, Equatable {
    public var address: TransportAddress
    public var expiresAt: Int64

    public init(address: TransportAddress, expiresAt: Int64) {
        self.address = address
        self.expiresAt = expiresAt
    }
}

/// One record of a journal: what changed.
public enum JournalRecord: Sendable, Equatable {
    /// An allocation, whole; replaces the one with its session id.
    case allocation(JournalAllocation)
    case allocationEnded(sessionID: UInt64)
    /// The node's secrets, all of them; replaces the earlier set.
    case keys([JournalKey])
    case reservation(token: UInt64, JournalReservation)
    case reservationEnded(token: UInt64)
}

/// What a journal holds once its records are applied in order: the state to restore, or to
/// write again as a compacted journal (`JournalWriter.compacted`).
public struct JournalState: Sendable, Equatable {
    public var allocations: [UInt64: JournalAllocation]
    public var keys: [JournalKey]
    public var reservations: [UInt64: JournalReservation]

    public init(
        allocations: [UInt64: JournalAllocation] = [:], keys: [JournalKey] = [],
        reservations: [UInt64: JournalReservation] = [:]
    ) {
        self.allocations = allocations
        self.keys = keys
        self.reservations = reservations
    }

    /// Applies one record: an allocation or reservation replaces the one with its id, an end
    /// removes it, keys replace the keys.
    public mutating func apply(_ record: JournalRecord) {
        switch record {
        case .allocation(let allocation): allocations[allocation.sessionID] = allocation
        case .allocationEnded(let id): allocations[id] = nil
        case .keys(let keys): self.keys = keys
        case .reservation(let token, let reservation): reservations[token] = reservation
        case .reservationEnded(let token): reservations[token] = nil
        }
    }
}
