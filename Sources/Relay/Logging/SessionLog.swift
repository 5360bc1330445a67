import Logging
import RelayCore
import StunCodec

/// Sessions in the log: one `allocation_created` (or `allocation_restored`, from the state
/// journal), `allocation_moved` and `allocation_deleted` line each (docs/operations.md), and a
/// debug line per Refresh.
final class SessionLog: SessionObserver {
    /// The loop's logger as it is now (a reload changes its level).
    private let logger: () -> Logger

    init(logger: @escaping () -> Logger) { self.logger = logger }

    func observe(_ event: SessionEvent) {
        switch event {
        case .started(let start): started(start)
        case .refreshed(let refresh):
            logger().debug(
                "allocation refreshed",
                metadata: [
                    "event": "allocation_refreshed", "session": "\(refresh.session)",
                    "five_tuple": "\(refresh.fiveTuple)", "lifetime_s": "\(refresh.lifetimeSeconds)",
                ])
        case .moved(let move):
            logger().info(
                "allocation moved",
                metadata: [
                    "event": "allocation_moved", "session": "\(move.session)", "from": "\(move.from)",
                    "five_tuple": "\(move.to)",
                ])
        case .ended(let summary): ended(summary)
        }
    }

    private func started(_ s: SessionStart) {
        logger().info(
            s.adopted ? "allocation restored" : "allocation created",
            metadata: [
                "event": s.adopted ? "allocation_restored" : "allocation_created", "session": "\(s.session)", "five_tuple": "\(s.fiveTuple)",
                "relayed": "\(s.relayed)", "bound": "\(s.bound)", "user": "\(LogSafe.text(s.user))",
                "lifetime_s": "\(s.lifetimeSeconds)", "password_algorithm": "\(s.credentials.passwordLabel)",
                "integrity": "\(s.credentials.integrityLabel)",
            ].merging(Self.extra(relayedAdditional: s.additionalRelayed, tenant: s.tenant)) { a, _ in a })
    }

    /// A dual allocation's second relayed address and a tenant's name, when there are.
    private static func extra(relayedAdditional: TransportAddress?, tenant: String) -> Logger.Metadata {
        var extra: Logger.Metadata = [:]
        if let relayedAdditional { extra["relayed_additional"] = "\(relayedAdditional)" }
        if !tenant.isEmpty { extra["tenant"] = "\(tenant)" }
        return extra
    }

    /// With what it relayed, in the core and in the kernel after the last collection.
    private func ended(_ s: SessionSummary) {
        let t = s.traffic + (s.relayedOutside ?? TrafficCounters())
        logger().info(
            "allocation deleted",
            metadata: [
                "event": "allocation_deleted", "session": "\(s.session)", "five_tuple": "\(s.fiveTuple)",
                "relayed": "\(s.relayed)", "user": "\(LogSafe.text(s.user))", "reason": "\(s.reason.rawValue)",
                "duration_s": "\(s.durationSeconds)",
                "packets_to_peer": "\(t.packetsToPeer)", "bytes_to_peer": "\(t.bytesToPeer)",
                "packets_to_client": "\(t.packetsToClient)", "bytes_to_client": "\(t.bytesToClient)",
                "permissions": "\(s.permissionsUsed)", "channels": "\(s.channelsUsed)",
                "password_algorithm": "\(s.credentials.passwordLabel)", "integrity": "\(s.credentials.integrityLabel)",
            ].merging(Self.extra(relayedAdditional: s.additionalRelayed, tenant: s.tenant)) { a, _ in a })
    }
}
