/// What a reader recovered from a journal: the state to restore, and what it left out and why.
public struct JournalRecovery: Sendable, Equatable {
    /// The allocations, keys and reservations that are live at the reader's `now` and within its
    /// bounds. `JournalAllocation.adopted(listener:main:additional:now:)` turns each allocation
    /// into what `RelayCore.adopt` takes.
    public var state: JournalState
    /// Whole frames read, whether their records were applied, refused or skipped.
    public var records: Int
    /// The bytes up to the end of the last whole frame: where the next record is appended, once
    /// the file is truncated to it.
    public var validBytes: Int
    /// Why reading stopped early, nil when the journal ends on a frame's end.
    public var tail: JournalTail?
    /// What was left out, by reason: whole records as they were read, then the lifetimes and
    /// times of what remained when all records were applied.
    public var drops: [JournalDropReason: Int]

    public init(
        state: JournalState = JournalState(), records: Int = 0, validBytes: Int = 0, tail: JournalTail? = nil,
        drops: [JournalDropReason: Int] = [:]
    ) {
        self.state = state
        self.records = records
        self.validBytes = validBytes
        self.tail = tail
        self.drops = drops
    }

    /// How many times `reason` left something out.
    public func dropped(_ reason: JournalDropReason) -> Int { drops[reason, default: 0] }

    mutating func drop(_ reason: JournalDropReason) { drops[reason, default: 0] += 1 }
}
