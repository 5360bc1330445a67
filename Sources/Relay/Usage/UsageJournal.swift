import Foundation
import Glibc
import RelayCore

/// The usage journal (docs/usage.md): `usage.jsonl` in `state-dir`, one record a line, appended
/// with one `write` per flush, so a crash loses at most the records of the last second. Every
/// process of the node appends to it (during a live upgrade, two at once; `O_APPEND` keeps
/// their lines whole) and reads what was appended since its last read, its own lines and the
/// other process's alike: a process's usage book is what the journal holds.
///
/// A line that does not parse is skipped and counted, never trusted. At a start that inherits
/// nothing, a journal over `compactBytes` is rewritten as one line per row of the book.
final class UsageJournal {
    let path: String
    private var descriptor: Int32
    private var offset: Int64 = 0
    /// Bytes after the last newline read: a line another process is writing.
    private var partial: [UInt8] = []
    private(set) var badLines: UInt64 = 0
    /// Read at most this much per call; the rest waits for the next.
    static let readChunk = 16 << 20
    /// The longest line read: a run of bytes with no newline past it is skipped as one bad line.
    static let maxLine = 64 << 10
    /// The last append wrote part of its lines: the next one starts with a newline, so the
    /// torn line stays one bad line instead of spoiling the next record.
    private var torn = false
    static let compactBytes: Int64 = 64 << 20

    init?(directory: String) {
        path = directory + "/usage.jsonl"
        descriptor = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return nil }
        // A file cut short mid-line (a crash, a full disk) gets its line ended before ours.
        var last: UInt8 = 0x0A
        let size = self.size
        if size > 0 && pread(descriptor, &last, 1, off_t(size - 1)) == 1 && last != 0x0A { torn = true }
    }

    deinit { close(descriptor) }

    /// Appends `records`, whole lines in one write (retried for what a short write left).
    /// Returns how many of them reached the file whole; the rest are the caller's to try again.
    func append(_ records: [UsageRecord]) -> Int {
        guard !records.isEmpty else { return 0 }
        let lines = records.map { Array($0.line.utf8) }
        var bytes = (torn ? [0x0A] : []) + lines.joined()
        let lead = torn ? 1 : 0
        var start = 0
        while start < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + start, $0.count - start) }
            if written < 0 {
                if errno == EINTR { continue }
                break
            }
            start += written
        }
        bytes.removeAll()
        // Which lines were written whole.
        var whole = 0
        var end = lead
        for line in lines {
            end += line.count
            guard end <= start else { break }
            whole += 1
        }
        let total = lead + lines.reduce(0) { $0 + $1.count }
        if start == total {
            torn = false
        } else if start > 0 {
            torn = true
        }
        return whole
    }

    /// The records appended since the last call (every process's), and compacted rows.
    func readNew() -> (records: [UsageRecord], rows: [(UsageBook.Key, UsageBook.Counts)]) {
        var records: [UsageRecord] = []
        var rows: [(UsageBook.Key, UsageBook.Counts)] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var budget = Self.readChunk
        while budget > 0 {
            let n = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            guard n > 0 else { break }
            offset += Int64(n)
            budget -= n
            partial += buffer[0..<n]
            guard let last = partial.lastIndex(of: 0x0A) else {
                if partial.count > Self.maxLine {
                    partial = []
                    badLines &+= 1
                }
                continue
            }
            let text = String(decoding: partial[..<last], as: UTF8.self)
            partial.removeSubrange(...last)
            for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
                if let record = UsageRecord(line: line) {
                    records.append(record)
                } else if let row = Self.row(line) {
                    rows.append(row)
                } else {
                    badLines &+= 1
                }
            }
        }
        return (records, rows)
    }

    var size: Int64 {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// Rewrites the journal as `rows`, one line each, through a new file renamed over it.
    func compact(_ rows: [UsageBook.Key: UsageBook.Counts]) -> Bool {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let bytes = Array(rows.map { Self.line($0.key, $0.value) }.joined().utf8)
        var start = 0
        while start < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + start, $0.count - start) }
            guard written > 0 else {
                close(fd)
                unlink(temporary)
                return false
            }
            start += written
        }
        guard fsync(fd) == 0, close(fd) == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            return false
        }
        let reopened = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard reopened >= 0 else { return false }
        close(descriptor)
        descriptor = reopened
        offset = Int64(bytes.count)
        partial = []
        return true
    }

    /// A compacted row as one line.
    static func line(_ key: UsageBook.Key, _ c: UsageBook.Counts) -> String {
        var w = JSONWriter()
        w.object { o in
            for (k, v) in [
                ("v", "1"), ("kind", "hour"), ("time", String(key.hour)), ("tenant", key.tenant), ("user", key.user),
                ("allocations", String(c.allocations)), ("unused_allocations", String(c.unusedAllocations)),
                ("allocation_seconds", String(c.allocationSeconds)),
                ("packets_to_peer", String(c.traffic.packetsToPeer)), ("bytes_to_peer", String(c.traffic.bytesToPeer)),
                ("packets_to_client", String(c.traffic.packetsToClient)),
                ("bytes_to_client", String(c.traffic.bytesToClient)),
            ] {
                o.field(k, v)
            }
        }
        return w.text + "\n"
    }

    /// A compacted row from its line; nil for anything else.
    static func row(_ line: Substring) -> (UsageBook.Key, UsageBook.Counts)? {
        guard let data = line.data(using: .utf8),
            let o = try? JSONSerialization.jsonObject(with: data) as? [String: String], o["v"] == "1",
            o["kind"] == "hour", let hour = o["time"].flatMap({ Int64($0) }), hour >= 0,
            hour % UsageBook.hour == 0, let tenant = o["tenant"], tenant.utf8.count <= 32, let user = o["user"],
            user.utf8.count <= 1024
        else { return nil }
        func n(_ key: String) -> UInt64? { o[key].flatMap { UInt64($0) } }
        guard let a = n("allocations"), let u = n("unused_allocations"), let s = n("allocation_seconds"),
            let pp = n("packets_to_peer"), let bp = n("bytes_to_peer"), let pc = n("packets_to_client"),
            let bc = n("bytes_to_client")
        else { return nil }
        var counts = UsageBook.Counts()
        counts.allocations = a
        counts.unusedAllocations = u
        counts.allocationSeconds = s
        counts.traffic = TrafficCounters(packetsToPeer: pp, bytesToPeer: bp, packetsToClient: pc, bytesToClient: bc)
        return (UsageBook.Key(hour: hour, tenant: tenant, user: user), counts)
    }
}
