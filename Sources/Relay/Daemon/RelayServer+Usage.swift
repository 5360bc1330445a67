import Foundation
import RelayCore

// Usage accounting on the main thread (docs/usage.md): once a second the loops' records go to
// the usage journal (with `state-dir`) and to the cluster's Redis stream, and into the book
// that `GET /api/v1/usage` reads.
extension RelayServer {
    /// The Redis stream a billing job reads (docs/usage.md), and its length bound.
    static let usageStream = "relayd:usage"
    static let usageStreamLength = "1000000"

    /// Opens `state-dir/usage.jsonl` and reads it into the book; at a start that inherits
    /// nothing, a journal grown past its bound is compacted to one line per row first.
    func openUsageJournal() {
        guard let directory = stateDirectory?.path else { return }
        guard let journal = UsageJournal(directory: directory) else {
            logger.error(
                "usage journal cannot be opened; usage is kept in memory only",
                metadata: ["event": "usage_journal_failed", "path": "\(directory)/usage.jsonl"])
            return
        }
        usageJournal = journal
        applyNew(from: journal)
        if inheritance == nil, journal.size > UsageJournal.compactBytes {
            if !journal.compact(usage.allRows) {
                logger.warning("usage journal could not be compacted", metadata: ["event": "usage_compact_failed"])
            }
        }
        if journal.badLines > 0 {
            logger.warning(
                "usage journal: \(journal.badLines) lines that do not parse were skipped",
                metadata: ["event": "usage_journal_bad_lines", "lines": "\(journal.badLines)"])
        }
    }

    func watchUsage(base: OpaquePointer) {
        usageTimer = LoopEvent(base: base, every: timeval(tv_sec: 1, tv_usec: 0)) { [unowned self] in flushUsage() }
    }

    /// The loops' new records: to the journal and the stream, then into the book.
    func flushUsage() {
        let pending = usage.takePending()
        if let journal = usageJournal {
            if !journal.append(pending) {
                logger.error("usage journal write failed", metadata: ["event": "usage_journal_write_failed"])
                for record in pending { usage.apply(record) }
            }
            applyNew(from: journal)
        } else {
            for record in pending { usage.apply(record) }
        }
        publishUsage(pending)
        usage.expire(now: Int64(time(nil)))
    }

    private func applyNew(from journal: UsageJournal) {
        let read = journal.readNew()
        for (key, counts) in read.rows { usage.restore(key, counts) }
        for record in read.records { usage.apply(record) }
    }

    /// Each record this process made, as one entry of the Redis stream, while Redis is up.
    private func publishUsage(_ records: [UsageRecord]) {
        guard let connection = clusterAgent?.connection, connection.state == .up else { return }
        for record in records {
            var command = ["XADD", Self.usageStream, "MAXLEN", "~", Self.usageStreamLength, "*"]
            command += [("node", clusterAgent?.name ?? "")].flatMap { [$0.0, $0.1] }
            command += record.fields.flatMap { [$0.0, $0.1] }
            _ = connection.send(command)
        }
    }
}
