import Glibc
import Logging
import RelayCore
import StunCodec

extension EventLoop {
    /// Serves on the UDP allocations whose clients this loop serves, kept by the state journal
    /// (docs/state-journal.md) or handed over by a live upgrade (docs/live-upgrade.md): each
    /// relay socket is bound again to its address, or taken as handed over, and the allocation
    /// adopted (`RelayCore.adopt`), then this loop's journal is written afresh. Runs after
    /// `start(udp:)` and before `run()`, so no client's datagram is read before.
    func restore() {
        let now = EventLoop.now()
        var restored = 0
        var failed: [String: Int] = [:]
        for allocation in wiring.restore {
            if let reason = restore(allocation, now: now) { failed[reason, default: 0] += 1 } else { restored += 1 }
        }
        // TCP and TLS clients a live upgrade handed over, each with its allocation, if it has one.
        var attempted = wiring.restore.count
        var connections = 0
        var tlsConnections = 0
        for (handed, fd) in wiring.inheritance?.streams(loop: wiring.index.value) ?? [] {
            guard let origin = stream.adopt(handed, fd: fd, now: now) else {
                failed["connection", default: 0] += 1
                if handed.session != 0 { attempted += 1 }
                continue
            }
            if handed.tls != nil { tlsConnections += 1 } else { connections += 1 }
            guard handed.session != 0 else { continue }
            attempted += 1
            guard let allocation = wiring.inheritance?.state.allocations[handed.session],
                allocation.fiveTuple == handed.fiveTuple
            else {
                failed["missing", default: 0] += 1
                continue
            }
            if let reason = restore(allocation, client: origin.socket, now: now) {
                failed[reason, default: 0] += 1
            } else {
                restored += 1
            }
        }
        // RFC 6062 pipes whose data connections this loop served, whichever loop their
        // allocation is on: each charges its allocation's account, made before the loops started.
        for (pipe, clientFD, peerFD, account) in wiring.inheritance?.pipes(loop: wiring.index.value) ?? [] {
            if stream.adoptPipe(pipe, clientFD: clientFD, peerFD: peerFD, account: account, now: now) {
                connections += 1
            } else {
                failed["pipe", default: 0] += 1
            }
        }
        restoreCounts = (UInt64(restored), UInt64(attempted - restored))
        // After the allocations: an Allocate that took its token as the old process paused
        // holds the port now, and the reservation is dropped.
        for (token, reservation) in wiring.reservations { core.adoptReservation(token: token, reservation, now: now) }
        // The journal first: it takes what the adoptions changed, so the flush writes nothing.
        journal?.compact(core, now: now)
        flush()
        guard attempted > 0 || connections > 0 || tlsConnections > 0 else { return }
        let source = wiring.inheritance == nil ? "the state journal" : "the live upgrade"
        var metadata: Logger.Metadata = [
            "event": "state_restored", "loop": "\(wiring.index.value)", "restored": "\(restored)",
            "source": "\(wiring.inheritance == nil ? "journal" : "upgrade")", "tcp_connections": "\(connections)",
            "tls_connections": "\(tlsConnections)",
        ]
        for (reason, count) in failed { metadata["not_restored_\(reason)"] = "\(count)" }
        logger.notice(
            "restored \(restored) allocations, \(connections) TCP and \(tlsConnections) TLS connections from \(source)",
            metadata: metadata)
    }

    /// The relay socket for `relay` of `allocation`: the one handed over, else bound anew.
    private func relaySocket(
        _ relay: JournalAllocation.Relay, additional: Bool, of allocation: JournalAllocation
    ) -> RelaySocketOpening {
        if let inheritance = wiring.inheritance,
            let fd = inheritance.relaySocket(session: allocation.sessionID, additional: additional, address: relay.address)
        {
            return adoptRelaySocket(fd)
        }
        return openRelaySocket(bound: relay.address)
    }

    /// Restores one allocation, of a UDP client or of the TCP client on `client`; the reason it
    /// could not be, if so.
    private func restore(_ allocation: JournalAllocation, client: ClientSocket? = nil, now: Int64) -> String? {
        guard
            let listener = client
                ?? core.udpListeners.first(where: { $0.address == allocation.fiveTuple.server })?.socket
        else { return "no_listener" }
        if let tcpRelay = wiring.inheritance?.tcpRelay(session: allocation.sessionID) {
            return restoreTCPRelay(allocation, tcpRelay, client: listener, now: now)
        }
        guard case .opened(let main) = relaySocket(allocation.main, additional: false, of: allocation) else {
            return "port_in_use"
        }
        var additional: RelaySocket? = nil
        if let second = allocation.additional,
            case .opened(let socket) = relaySocket(second, additional: true, of: allocation)
        {
            additional = socket
        }
        let sockets = [main] + (additional.map { [$0] } ?? [])
        if allocation.dontFragment {
            for socket in sockets where !UDPSocket.setDontFragment(socket.descriptor) {
                for socket in sockets { closeRelaySocket(socket) }
                return "dont_fragment"
            }
        }
        do {
            try core.adopt(allocation.adopted(listener: listener, main: main, additional: additional, now: now), now: now)
            if client == nil,
                let fd = wiring.inheritance?.steeredSocket(session: allocation.sessionID, client: allocation.fiveTuple.client)
            {
                adoptSteered(fd, for: allocation.fiveTuple)
            }
            return nil
        } catch {
            for socket in sockets { closeRelaySocket(socket) }
            return Self.reason(error)
        }
    }

    private static func reason(_ refusal: AdoptionRefusal) -> String {
        switch refusal {
        case .transportCannotMove: return "transport"
        case .fiveTupleInUse: return "duplicate"
        case .portUnavailable: return "port_outside_pool"
        case .expired: return "expired"
        }
    }

    /// Restores a TCP allocation (RFC 6062) a live upgrade handed over with its control
    /// connection: it accepts on its handed listener again, its peer connections that wait for a
    /// ConnectionBind are listed as they were, and the connects in progress are watched until
    /// their time is up. Its pipes come back on their own loops.
    private func restoreTCPRelay(
        _ allocation: JournalAllocation, _ handed: (snapshot: TCPRelaySnapshot, account: PipeAccount),
        client: ClientSocket, now: Int64
    ) -> String? {
        let index = wiring.index.value
        var sockets: [PeerConnectionID: Int32] = [:]
        var snapshot = handed.snapshot
        snapshot.connections.removeAll { connection in
            if case .piped = connection.state { return false }
            guard let fd = wiring.inheritance?.peerConnection(connection.id, loop: index) else { return true }
            sockets[connection.id] = fd
            return false
        }
        func closeSockets() { for fd in sockets.values { close(fd) } }
        guard let fd = wiring.inheritance?.relaySocket(session: allocation.sessionID, additional: false, address: allocation.main.address),
            case .opened(let main) = tcpRelay.watch(listener: fd)
        else {
            closeSockets()
            return "no_listener"
        }
        var ready: [PeerConnectionID: PeerSocket] = [:]
        for connection in snapshot.connections where connection.state == .ready {
            ready[connection.id] = sockets[connection.id].map(PeerSocket.init(descriptor:))
        }
        var adopted = allocation.adopted(listener: client, main: main, additional: nil, now: now)
        adopted.tcpRelay = AdoptedTCPRelay(snapshot: snapshot, readySockets: ready, account: handed.account)
        do {
            try core.adopt(adopted, now: now)
        } catch {
            closeSockets()
            closeRelaySocket(main)
            return Self.reason(error)
        }
        for connection in snapshot.connections {
            guard case .connecting = connection.state, let fd = sockets[connection.id] else { continue }
            let request = PeerConnect(
                id: connection.id, relaySocket: main, relayed: allocation.main.address, peer: connection.peer)
            tcpRelay.adoptConnect(fd, for: request, deadline: connection.deadline - RelayCore.tcpBindSeconds, now: now)
        }
        return nil
    }
}
