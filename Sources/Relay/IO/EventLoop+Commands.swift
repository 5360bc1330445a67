import Logging
import RelayCore

extension EventLoop {
    /// Runs the core's commands of one flush, in the order it emitted them.
    func execute(_ commands: [CoreCommand]) {
        for command in commands {
            switch command {
            case .closeRelaySocket(let socket):
                closeRelaySocket(socket)
            case .deliverToStream(let delivery):
                if streamDeliverer?(delivery) != true { core.streamDeliveryRefused(delivery, now: EventLoop.now()) }
            case .installChannel(let route):
                channelRoutes?.install(route)
            case .removeChannel(let route):
                channelRoutes?.remove(route)
            case .sessionStarted(let start):
                logSessionStart(start)
            case .sessionEnded(let summary):
                logSessionEnd(summary)
            }
        }
    }

    /// The `allocation_created` log line.
    func logSessionStart(_ s: SessionStart) {
        core.logger.info(
            "allocation created",
            metadata: [
                "event": "allocation_created", "session": "\(s.session)", "five_tuple": "\(s.fiveTuple)",
                "relayed": "\(s.relayed)", "bound": "\(s.bound)", "user": "\(LogSafe.text(s.user))",
                "lifetime_s": "\(s.lifetimeSeconds)",
            ])
    }

    /// The `allocation_deleted` log line: one per allocation, with what it relayed.
    func logSessionEnd(_ s: SessionSummary) {
        let t = s.traffic
        core.logger.info(
            "allocation deleted",
            metadata: [
                "event": "allocation_deleted", "session": "\(s.session)", "five_tuple": "\(s.fiveTuple)",
                "relayed": "\(s.relayed)", "user": "\(LogSafe.text(s.user))", "reason": "\(s.reason.rawValue)",
                "duration_s": "\(s.durationSeconds)",
                "packets_to_peer": "\(t.packetsToPeer)", "bytes_to_peer": "\(t.bytesToPeer)",
                "packets_to_client": "\(t.packetsToClient)", "bytes_to_client": "\(t.bytesToClient)",
                "permissions": "\(s.permissionsUsed)", "channels": "\(s.channelsUsed)",
            ])
    }
}

/// Where a loop sends the core's channel routes (`CoreCommand.installChannel`/`removeChannel`):
/// a data plane that relays established channels without the core. A loop without one ignores
/// them, and every ChannelData goes through the core.
protocol ChannelRouteTable: AnyObject {
    func install(_ route: ChannelRoute)
    func remove(_ route: ChannelRoute)
}
