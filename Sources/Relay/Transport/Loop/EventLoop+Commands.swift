import FastPath
import Glibc
import Logging
import RelayCore

extension EventLoop {
    /// Carries out one of the core's commands, in the order of its stream (`Outbox.forEachInOrder`).
    /// `ended` keeps what the kernel relayed for allocations whose routes this flush removed,
    /// for their summaries, which come after.
    func perform(_ command: CoreCommand, ended: inout [RelaySocket: KernelFastPath.Counters]) {
        switch command {
        case .openRelaySocket(let request):
            open(request)
        case .closeRelaySocket(let socket):
            closeRelaySocket(socket)
        case .watchRelaySocket(let socket, let drain):
            watchRelaySocket(socket, drain: drain)
        case .setDontFragment(let socket):
            if !UDPSocket.setDontFragment(socket.descriptor) {
                core.logger.warning("cannot set DONT-FRAGMENT on a relay socket", metadata: ["event": "dont_fragment_failed"])
            }
        case .deliverToStream(let delivery):
            if !stream.deliver(delivery) { core.streamDeliveryRefused(delivery, now: EventLoop.now()) }
        case .installChannel(let route):
            fastPath?.install(route)
        case .removeChannel(let route):
            guard let fastPath else { return }
            let relayed = fastPath.remove(route)
            if !report(relayed, for: route.relaySocket) { ended[route.relaySocket, default: .init()] += relayed }
        case .forwardRequest(let request):
            post(.forwarded(request), to: request.thread)
        case .steerClient(_, let from, let to):
            steer(from: from, to: to)
        case .connectPeer(let request):
            tcpRelay.connect(request)
        case .lookUpUser(let lookup):
            lookUpUser(lookup)
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
            if case .started(let start) = event, start.fiveTuple.transport != .udp { connectionAllocated(start) }
            for observer in sessionObservers { observer.observe(event) }
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

extension EventLoop {
    /// A TCP, TLS or DTLS client's connection got an allocation, whenever the core made it (at
    /// once, or after the admission ledger's answer and the relay socket's open): it no longer
    /// counts as pending against its source's connection limits (docs/rate-limits.md).
    func connectionAllocated(_ start: SessionStart) {
        if start.fiveTuple.transport == .dtls {
            dtls.connectionAllocated(socket: start.clientSocket, fiveTuple: start.fiveTuple)
        } else {
            stream.connectionAllocated(socket: start.clientSocket, fiveTuple: start.fiveTuple)
        }
    }
}

extension EventLoop {
    /// Hands a user lookup to the user database's thread (docs/userdb.md); without one, the
    /// answer is "no such user" at once.
    func lookUpUser(_ lookup: UserLookup) {
        guard let ask = wiring.lookUpUser else { return post(.userLookedUp(lookup, .missing), to: lookup.loop) }
        ask(lookup)
    }
}
