/// The byte layout of the state journal (docs/state-journal.md): the file that lets UDP
/// allocations outlive a crash of the process, and the snapshot a live upgrade hands over.
///
/// A journal is a header and then records, each framed as a type byte, a payload length, the
/// payload and a CRC-32 over the three. Integers are big-endian. Times are absolute
/// `CLOCK_BOOTTIME` seconds, the clock the core's `now` already runs on (docs/clocks.md), so
/// they mean the same in another process of the same boot; the header's boot id says which boot.
public enum JournalFormat {
    /// The first 8 bytes: a non-ASCII byte, "RLJ", CR LF, SUB, LF (as PNG does), so a file
    /// mangled by a text-mode copy or of another kind is told apart at once.
    public static let magic: [UInt8] = [0x89, 0x52, 0x4C, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The only version this code reads and writes. A new layout gets a new number; a reader
    /// refuses numbers it does not know rather than guess at their bytes.
    public static let version: UInt16 = 1
    /// Magic (8), version (2), boot id (16), CRC-32 of those 26 bytes (4).
    public static let headerBytes = 30
    /// Type (1) and payload length (4) before a payload, CRC-32 (4) after it.
    public static let frameOverhead = 9
    /// The longest payload a frame may announce. A length beyond it is a damaged frame, not a
    /// record; the largest real record (an allocation with 65,535 permissions and every channel)
    /// is under 2 MiB.
    public static let maxPayloadBytes = 4 << 20

    /// What a frame's type byte says its payload is. Type 0 is never written, so a tail of zero
    /// bytes (a file extended but not written before a crash) never reads as a record.
    public enum RecordType: UInt8, Sendable, CaseIterable {
        /// An allocation, whole: replaces any earlier one with its session id.
        case allocation = 1
        /// An allocation ended: removes the one with its session id.
        case allocationEnded = 2
        /// The node's secrets, all of them: replaces the earlier set.
        case keys = 3
        /// A port reserved by EVEN-PORT's R bit (RFC 8656 §7.2, §18.10), by its token.
        case reservation = 4
        /// A reservation taken by its Allocate or expired: removes it.
        case reservationEnded = 5
    }

    // Limits of the format itself, the same for every caller (`JournalBounds` are the caller's).

    /// USERNAME and the user id: what the codec accepts on receipt (RFC 8489 §14.3).
    public static let maxUsernameBytes = 763
    /// The stored Allocate response: one datagram.
    public static let maxAllocateResponseBytes = 1500
    /// Channel numbers a client may bind (RFC 8656 §12): 0x4000 through 0x4FFF.
    public static let channelNumbers: ClosedRange<UInt16> = 0x4000...0x4FFF
    /// Named secrets in a keys record, the bytes of a name, the bytes of a secret.
    public static let maxKeys = 64
    public static let maxKeyNameBytes = 64
    public static let maxKeyBytes = 4096
}
