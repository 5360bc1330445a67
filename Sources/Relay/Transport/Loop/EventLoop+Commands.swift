import FastPath
import Glibc
import Logging
import RelayCore

extension EventLoop {
    /// The flush's `steerClient` commands, run before its packets are sent.
    func steerMovedClients(_ commands: [CoreCommand]) {
        for case .steerClient(_, let from, let to) in commands { steer(from: from, to: to) }
    }

    /// The flush's `installChannel` commands, run before its packets are sent.
    func installRoutes(_ commands: [CoreCommand]) {
        for case .installChannel(let route) in commands { fastPath?.install(route) }
    }

    /// Runs the core's commands of one flush, in the order it emitted them (routes to install
    /// and moved clients' sockets went in already, before the packets).
    func execute(_ commands: [CoreCommand]) {
        // What the kernel relayed for allocations that ended in this batch: their routes are
        // removed just before their summaries.
        var ended: [RelaySocket: KernelFastPath.Counters] = [:]
        for command in commands {
            switch command {
            case .closeRelaySocket(let socket):
                closeRelaySocket(socket)
            case .setDontFragment(let socket):
                if !UDPSocket.setDontFragment(socket.descriptor) {
                    core.logger.warning("cannot set DONT-FRAGMENT on a relay socket", metadata: ["event": "dont_fragment_failed"])
                }
            case .deliverToStream(let delivery):
                if !stream.deliver(delivery) { core.streamDeliveryRefused(delivery, now: EventLoop.now()) }
            case .installChannel:
                break
            case .removeChannel(let route):
                guard let fastPath else { continue }
                let relayed = fastPath.remove(route)
                if !report(relayed, for: route.relaySocket) { ended[route.relaySocket, default: .init()] += relayed }
            case .forwardRequest(let request):
                post(.forwarded(request), to: request.thread)
            case .steerClient:
                break
            case .connectPeer(let request):
                tcpRelay.connect(request)
            case .bindDataConnection(let bind):
                if !stream.startPipe(bind) {
                    close(bind.peerSocket.descriptor)
                    core.tables.tcpConnections.remove(bind.id)
                }
            case .session(.ended(var summary)):
                summary.relayedOutside = ended.removeValue(forKey: summary.relaySocket)
                if let second = summary.additionalRelaySocket, let more = ended.removeValue(forKey: second) {
                    summary.relayedOutside = (summary.relayedOutside ?? .init()) + more
                }
                for observer in sessionObservers { observer.observe(.ended(summary)) }
            case .session(let event):
                for observer in sessionObservers { observer.observe(event) }
            }
        }
    }

    /// Hands what the kernel relayed to the core; false when its allocation has ended already.
    @discardableResult
    func report(_ relayed: KernelFastPath.Counters, for socket: RelaySocket) -> Bool {
        core.addRelayedOutsideCore(relayed, relaySocket: socket)
    }

    /// Once a second: what the kernel relayed since the last collection, into the core.
    func collectFastPathTraffic() {
        guard let fastPath else { return }
        for (socket, relayed) in fastPath.collect() { report(relayed, for: socket) }
    }
}
