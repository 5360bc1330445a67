import CRelayFastPath
import RelayCore
import StunCodec

/// One loop thread's side of the kernel fast path: executes its core's channel route commands
/// into the shared maps (`KernelFastPath`), remembers what it installed, and hands what the
/// kernel relayed back to the core, so allocations' traffic, `/metrics` and the session summary
/// count every packet, wherever it was relayed (docs/kernel-fast-path.md).
package final class FastPathRoutes {
    package let fastPath: KernelFastPath

    private struct Installed {
        var route: ChannelRoute
        /// The counters already handed to the core.
        var reported = KernelFastPath.Counters()
        /// Installed without the XDP program's link-layer addresses (the next hop not in the
        /// neighbour table yet): installed again once a second until they are known.
        var linkLayerMissing = false
    }

    /// Routes re-installed per second for their link-layer addresses, at most.
    static let linkLayerRetriesPerSecond = 64

    /// Installed routes by relay socket and channel number.
    private var installed: [RouteID: Installed] = [:]
    /// What replaced routes relayed before they went (a channel whose client moved), for the
    /// next `collect`.
    private var unreported: [(RelaySocket, KernelFastPath.Counters)] = []

    private struct RouteID: Hashable {
        var relaySocket: RelaySocket
        var number: UInt16
    }

    package init(_ fastPath: KernelFastPath) { self.fastPath = fastPath }

    /// Routes installed by this loop.
    package var count: Int { installed.count }
    /// Everything the kernel relayed for this loop's routes, as reported to the core.
    package private(set) var relayed = KernelFastPath.Counters()

    /// The program's machine-wide figures, for `/metrics`: the packets it left to relayd, by
    /// reason (route expired, length mismatch, unsupported), and those the XDP program relayed.
    package func programFigures() -> (fallback: [UInt64], xdp: UInt64) {
        let stats = fastPath.statistics()
        let fallback = [
            stats[Int(RELAYD_STAT_PASS_EXPIRED.rawValue)], stats[Int(RELAYD_STAT_PASS_LENGTH.rawValue)],
            stats[Int(RELAYD_STAT_PASS_UNSUPPORTED.rawValue)],
        ]
        return (fallback, stats[Int(RELAYD_STAT_XDP.rawValue)])
    }

    /// `installChannel`: installs or refreshes the route (its counters carry on). When the
    /// channel's client moved to another 5-tuple (mobility, docs/mobility.md), the entries of the
    /// old one are removed first: the core's `removeChannel` for the old route comes after this
    /// install (routes go in before a flush's other commands) and is then a no-op.
    package func install(_ route: ChannelRoute) {
        let id = RouteID(relaySocket: route.relaySocket, number: route.number)
        if let old = installed[id], old.route.client != route.client || old.route.server != route.server {
            installed[id] = nil
            let delta = fastPath.remove(old.route) - old.reported
            relayed += delta
            unreported.append((route.relaySocket, delta))
        }
        guard fastPath.install(route) else { return }
        installed[id, default: Installed(route: route)].route = route
        installed[id]?.linkLayerMissing = FastPathEntries.linkLayerMissing(route, in: fastPath)
    }

    /// A live upgrade's heir serves these routes now, in the same maps: this loop forgets them
    /// without removing an entry, so its allocations' ends remove nothing the heir installed.
    package func letGo() {
        installed.removeAll()
        unreported.removeAll()
    }

    /// `removeChannel`: removes the route; what the kernel relayed since the last report. A route
    /// for a client the channel no longer has (replaced by `install`) removes nothing.
    package func remove(_ route: ChannelRoute) -> KernelFastPath.Counters {
        let id = RouteID(relaySocket: route.relaySocket, number: route.number)
        guard let current = installed[id], current.route.client == route.client, current.route.server == route.server,
            let entry = installed.removeValue(forKey: id)
        else { return KernelFastPath.Counters() }
        let delta = fastPath.remove(entry.route) - entry.reported
        relayed += delta
        return delta
    }

    /// Once a second: what each installed route relayed since the last report, by relay socket.
    package func collect() -> [(RelaySocket, KernelFastPath.Counters)] {
        var retries = Self.linkLayerRetriesPerSecond
        for (id, entry) in installed where entry.linkLayerMissing && retries > 0 {
            retries -= 1
            if fastPath.install(entry.route) {
                installed[id]?.linkLayerMissing = FastPathEntries.linkLayerMissing(entry.route, in: fastPath)
            }
        }
        var result = unreported
        unreported.removeAll()
        for (id, entry) in installed {
            let total = fastPath.counters(of: entry.route)
            let delta = total - entry.reported
            guard delta != KernelFastPath.Counters() else { continue }
            installed[id]?.reported = total
            relayed += delta
            result.append((id.relaySocket, delta))
        }
        return result
    }
}
