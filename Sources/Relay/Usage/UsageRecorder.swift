import Glibc
import RelayCore

/// A loop's session observer that turns sessions into usage records (docs/usage.md): one
/// `made` record per Allocate granted, one `ended` record when an allocation ends or leaves this
/// process, with what it relayed here (the fast path's share included, an RFC 6062
/// allocation's bytes carried from an older process excluded).
final class UsageRecorder: SessionObserver {
    private let book: UsageBook

    init(book: UsageBook) { self.book = book }

    func observe(_ event: SessionEvent) {
        switch event {
        case .started(let start) where !start.adopted:
            book.add(
                UsageRecord(
                    kind: .made, time: Int64(time(nil)), tenant: start.tenant,
                    user: UsageRecord.plainUser(start.user, tenant: start.tenant), session: start.session))
        case .ended(let summary):
            var record = UsageRecord(
                kind: .ended, time: Int64(time(nil)), tenant: summary.tenant,
                user: UsageRecord.plainUser(summary.user, tenant: summary.tenant), session: summary.session)
            let total = summary.traffic + (summary.relayedOutside ?? TrafficCounters())
            record.traffic = total.subtracting(summary.carried)
            record.seconds = max(0, summary.durationSeconds)
            record.final = summary.reason != .handedOver
            book.add(record)
        default:
            break
        }
    }

}

extension TrafficCounters {
    /// These counts less `other`'s, each at least 0.
    func subtracting(_ other: TrafficCounters) -> TrafficCounters {
        func minus(_ a: UInt64, _ b: UInt64) -> UInt64 { a >= b ? a - b : 0 }
        return TrafficCounters(
            packetsToPeer: minus(packetsToPeer, other.packetsToPeer), bytesToPeer: minus(bytesToPeer, other.bytesToPeer),
            packetsToClient: minus(packetsToClient, other.packetsToClient),
            bytesToClient: minus(bytesToClient, other.bytesToClient))
    }
}
