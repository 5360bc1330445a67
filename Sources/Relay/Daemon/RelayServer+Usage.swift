import Foundation
import CLibevent
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
        // An heir reads the journal from its timer, a chunk a second, so the start of a live
        // upgrade is not held up by it; a fresh start reads all of it, then compacts it.
        guard inheritance == nil else { return }
        usage.expire(now: Int64(time(nil)))
        while applyNew(from: journal) {}
        if journal.size > UsageJournal.compactBytes {
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

    /// The loops' new records: to the journal and the stream, then into the book. Records the
    /// journal could not take (a full disk) wait for the next flush, and are counted once they
    /// are in the journal, never twice.
    func flushUsage() {
        usage.expire(now: Int64(time(nil)))
        let pending = usage.takePending()
        if let journal = usageJournal {
            let written = journal.append(pending)
            if written < pending.count {
                logger.error(
                    "usage journal write failed; \(pending.count - written) records wait for the next try",
                    metadata: ["event": "usage_journal_write_failed"])
                usage.requeue(Array(pending[written...]))
            }
            publishUsage(Array(pending[..<written]))
            applyNew(from: journal)
        } else {
            for record in pending { usage.apply(record) }
            publishUsage(pending)
        }
    }

    /// The journal's new lines into the book; false when there were none.
    @discardableResult
    private func applyNew(from journal: UsageJournal) -> Bool {
        let read = journal.readNew()
        for (key, counts) in read.rows { usage.restore(key, counts) }
        for record in read.records { usage.apply(record) }
        return !read.records.isEmpty || !read.rows.isEmpty
    }

    /// The last records, once the loops are done: to the journal, and to the Redis stream
    /// while the main loop still runs a few turns to send them.
    func finishUsage(base: OpaquePointer) {
        flushUsage()
        guard clusterAgent?.connection.state == .up else { return }
        for _ in 0..<20 {
            event_base_loop(base, EVLOOP_NONBLOCK)
            usleep(5_000)
        }
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
