import CLibevent
import Glibc
import RelayCore

// The sockets of TCP allocations (RFC 6062) in a live upgrade (docs/live-upgrade.md, "RFC 6062
// connections"). The running process stops accepting and watching connects for the allocations
// that move, and then either goes on (the upgrade failed) or lets go of its copies without a
// word to a peer; the heir accepts on the listeners and watches the connects it was handed.
extension TCPRelaySockets {
    /// A peer connection of an allocation that moves: connecting, or ready for its ConnectionBind.
    struct HandedPeer {
        var id: PeerConnectionID
        var fd: Int32
    }

    /// Stops accepting on the listener `relaySocket` and watching its connects; the sockets of
    /// its peer connections that are not piped. Peers that connect meanwhile wait in the
    /// listener's backlog, and connects that end wait in the kernel, for whichever process
    /// looks next.
    func pauseForHandover(_ relaySocket: RelaySocket) -> [HandedPeer] {
        if let event = listeners[relaySocket.descriptor] { event_del(event) }
        handingOver.insert(relaySocket.descriptor)
        var handed: [HandedPeer] = []
        for (fd, pending) in connecting where pending.request.relaySocket == relaySocket {
            event_del(pending.event)
            handed.append(HandedPeer(id: pending.request.id, fd: fd))
        }
        for entry in table.handingOver(true, thread: thread, relaySocket: relaySocket) {
            if case .ready(let socket) = entry.state { handed.append(HandedPeer(id: entry.id, fd: socket.descriptor)) }
        }
        return handed
    }

    /// The upgrade failed: accepting and connecting go on. A paused connect gets its full time
    /// again (a few seconds more at most than it had).
    func resumeAfterHandover() {
        for fd in handingOver {
            _ = table.handingOver(false, thread: thread, relaySocket: RelaySocket(descriptor: fd))
            if !paused.contains(fd), let event = listeners[fd] { event_add(event, nil) }
        }
        for pending in connecting.values where handingOver.contains(pending.request.relaySocket.descriptor) {
            var timeout = timeval(tv_sec: Int(RelayCore.tcpConnectSeconds), tv_usec: 0)
            event_add(pending.event, &timeout)
        }
        handingOver = []
    }

    /// The heir serves the paused allocations: their listeners' events go, and their peer
    /// connections leave the node's table, this process's copies of the sockets closed (the heir
    /// holds them open, so no peer sees a FIN). Pipes are left to their loops: those that moved
    /// are let go there, those that could not move go on here until they end. The listener's
    /// own copy closes when the allocation ends here.
    func letGoHandedOver() {
        for listener in handingOver {
            if let event = listeners.removeValue(forKey: listener) { event_free(event) }
            paused.remove(listener)
            for (fd, pending) in connecting where pending.request.relaySocket.descriptor == listener {
                event_free(pending.event)
                connecting[fd] = nil
                Glibc.close(fd)
            }
            for entry in table.removeAll(thread: thread, relaySocket: RelaySocket(descriptor: listener)) {
                if case .ready(let socket) = entry.state { Glibc.close(socket.descriptor) }
            }
        }
        handingOver = []
    }

    /// A connect the running relayd started for a Connect and handed over: it is watched until
    /// `deadline` (monotonic seconds) as if started here. When it cannot be, it counts as
    /// failed (its Connect gets 447, RFC 6062 §5.2) and the socket is closed.
    func adoptConnect(_ fd: Int32, for request: PeerConnect, deadline: Int64, now: Int64) {
        guard watch(connecting: fd, for: request, seconds: deadline - now) else {
            _ = loop.core.peerConnectFinished(request.id, relaySocket: request.relaySocket, connected: false, now: now)
            Glibc.close(fd)
            return
        }
    }
}
