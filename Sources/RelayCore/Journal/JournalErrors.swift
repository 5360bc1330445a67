/// Why a journal's header was refused: nothing after it is read, and the caller starts clean.
public enum JournalHeaderError: Error, Sendable, Equatable {
    /// Fewer bytes than a header: nothing, or a header cut short by a crash while creating it.
    case truncated
    /// Not a relayd journal.
    case badMagic
    /// A version this code does not read (a newer relayd wrote it, or an older one's downgrade).
    case unsupportedVersion(UInt16)
    /// The header's CRC-32 does not match: it is damaged, so its boot id says nothing.
    case badChecksum
    /// Written in another boot: its `CLOCK_BOOTTIME` times and its sockets are gone.
    case otherBoot
}

/// Why a record could not be written; the journal is left as it was.
public enum JournalEncodingError: Error, Sendable, Equatable {
    /// A text, byte string or list longer than the format holds (the field's name).
    case tooLong(String)
    /// A time before boot, or a negative `max-bps` (the field's name).
    case negative(String)
    /// A record a reader would refuse, and why (`JournalDropReason`): the writer reads each
    /// record back before it appends it.
    case unreadable(JournalDropReason)
}

/// Why a reader left something out of the state it recovered (`JournalRecovery.drops`).
public enum JournalDropReason: Sendable, Hashable, CaseIterable {
    // A whole record, as it is read; an allocation or reservation refused this way also removes
    // the earlier record with its id, which it was written to replace.

    /// A record type this version does not know, with a good CRC: skipped.
    case unknownRecordType
    /// A field out of its range, a length that does not add up, bytes left over.
    case malformed
    /// A 5-tuple whose transport is not UDP: a stream or DTLS client's connection does not
    /// survive its process, so no such allocation is restored.
    case notUDP
    /// More permissions than `JournalBounds.permissionsPerAllocation`.
    case tooManyPermissions

    // Checked against `now` and `JournalBounds` once the records are applied.

    /// A record written later than the reader's `now`: `CLOCK_BOOTTIME` never goes back within
    /// a boot, so its times cannot be trusted.
    case writtenAfterNow
    /// An allocation whose lifetime ran out, or is longer than the bound from when it was written.
    case allocationExpired
    case allocationLifetimeTooLong
    /// The same for one permission or channel of an allocation that is kept.
    case permissionExpired
    case permissionLifetimeTooLong
    case channelExpired
    case channelLifetimeTooLong
    /// The same for an EVEN-PORT reservation.
    case reservationExpired
    case reservationLifetimeTooLong
}

/// Why reading stopped before the end: the bytes from there on are left out, and a writer
/// appending to the journal truncates it to `JournalRecovery.validBytes` first.
public enum JournalTail: Sendable, Equatable {
    /// The last frame is cut short: a write torn by a crash.
    case truncated
    /// A whole frame whose CRC-32 does not match: torn or damaged.
    case checksumMismatch
    /// A frame announcing a payload longer than `JournalFormat.maxPayloadBytes`: damaged.
    case oversizedRecord
}
