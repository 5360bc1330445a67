import Glibc
import Logging
import RelayCore
import StunCodec

/// One loop's state journal (docs/state-journal.md): `loop-<index>.journal` in the `state-dir`,
/// appended with what its core's UDP allocations changed once per loop iteration that changed
/// something (one write(2), no fsync: a crash of the process loses nothing the kernel has), and
/// written afresh (compacted) when it grows to several times its live size. A relayed packet
/// never reaches it.
final class LoopJournal {
    let path: String
    let bootID: BootID
    /// The node's secrets written into each compacted journal (docs/state-journal.md, "Keys
    /// record"): the nonce key, the mobility-ticket keys, the TLS and DTLS ticket keys and the
    /// DTLS cookie secret; replaced after a SIGHUP.
    var keys: [JournalKey]
    private let logger: Logger
    private var fd: Int32 = -1
    private var records: [JournalRecord] = []
    private var buffer: [UInt8] = []
    /// Bytes in the file, and its size when it was last compacted.
    private(set) var bytes = 0
    private var compactedBytes = 0
    /// A write failed and was logged; the next success logs the recovery.
    private var failing = false
    /// Writes that failed (each loses what it carried for a crash, never for the running process).
    private(set) var failures: UInt64 = 0

    /// Compaction once the file is this big and four times its compacted size.
    static let compactionFloor = 1 << 20

    init(path: String, bootID: BootID, keys: [JournalKey], logger: Logger) {
        self.path = path
        self.bootID = bootID
        self.keys = keys
        self.logger = logger
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Appends what `core` changed since the last call.
    func write(_ core: RelayCore, now: Int64) {
        records.removeAll(keepingCapacity: true)
        core.takeJournalRecords(into: &records)
        guard !records.isEmpty else { return }
        guard fd >= 0 else { return noteFailure("the journal is not open") }
        buffer.removeAll(keepingCapacity: true)
        for record in records {
            do { try JournalWriter.append(record, now: now, to: &buffer, verify: false) } catch {
                // The writer refuses what a reader would refuse: that allocation is not kept.
                logger.debug("state journal: a record not written: \(error)")
            }
        }
        guard writeAll(buffer, to: fd) else {
            // A record may be cut short in the file: the next tick writes it afresh.
            noteFailure(String(cString: strerror(errno)))
            close(fd)
            fd = -1
            return
        }
        bytes += buffer.count
        noteSuccess()
    }

    /// Writes the journal afresh from `core`'s live allocations when it has grown enough.
    func compactIfDue(_ core: RelayCore, now: Int64) {
        guard fd < 0 || (bytes >= Self.compactionFloor && bytes >= 4 * compactedBytes) else { return }
        compact(core, now: now)
    }

    /// Writes the journal afresh from `core`'s live allocations: a temporary file, then a rename
    /// over the old one, so a crash meanwhile leaves one whole journal or the other.
    func compact(_ core: RelayCore, now: Int64) {
        let state = JournalState(
            allocations: core.journalAllocations(), keys: keys, reservations: core.liveReservations())
        let fresh: [UInt8]
        do { fresh = try JournalWriter.compacted(state, bootID: bootID, now: now) } catch {
            return noteFailure("cannot encode the journal: \(error)")
        }
        let temporary = path + ".tmp"
        let out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else { return noteFailure("\(temporary): \(String(cString: strerror(errno)))") }
        let written = writeAll(fresh, to: out) && fsync(out) == 0
        close(out)
        guard written, rename(temporary, path) == 0 else {
            unlink(temporary)
            return noteFailure("\(temporary): \(String(cString: strerror(errno)))")
        }
        if fd >= 0 { close(fd) }
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { return noteFailure("\(path): \(String(cString: strerror(errno)))") }
        bytes = fresh.count
        compactedBytes = fresh.count
        noteSuccess()
    }

    /// A live upgrade's heir keeps the journal now (docs/live-upgrade.md): closed, left in place.
    func detach() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// The loop stopped cleanly: every allocation ended, so nothing is left to restore.
    func remove() {
        if fd >= 0 { close(fd) }
        fd = -1
        unlink(path)
    }

    private func writeAll(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }

    private func noteFailure(_ reason: String) {
        failures += 1
        guard !failing else { return }
        failing = true
        logger.error(
            "state journal \(path): \(reason); allocations changed meanwhile will not survive a crash",
            metadata: ["event": "state_journal_failed"])
    }

    private func noteSuccess() {
        guard failing else { return }
        failing = false
        logger.notice("state journal \(path) writes again", metadata: ["event": "state_journal_recovered"])
    }
}
