import Glibc
import RelayCore
import StunCodec

/// An RFC 6062 pipe on its way to the heir of a live upgrade: its state and its two sockets.
struct HandedPipe {
    var pipe: HandoverPipe
    var clientFD: Int32
    var peerFD: Int32
}

/// What the main thread tells the loops of a pipe whose allocation moves: the allocation's
/// session id and the peer's address.
struct PipeOwner: Sendable {
    var session: UInt64
    var peer: TransportAddress
}

// RFC 6062 pipes in a live upgrade (docs/live-upgrade.md, "RFC 6062 connections"). A pipe runs
// on the loop its data connection landed on, which need not be its allocation's; it moves when
// its allocation does (the main thread says which, once every loop paused) and it can.
extension StreamTransport {
    /// Pauses this loop's pipes of the allocations that move, as far as they can move, and
    /// returns them for the heir.
    func pausePipesForHandover(_ owners: [PeerConnectionID: PipeOwner], loop index: UInt16) -> [HandedPipe] {
        var handed: [HandedPipe] = []
        for (id, connection) in pipes {
            guard let owner = owners[id], connection.transport == .tcp, let pipe = connection.pipe,
                let held = connection.pausePipeForHandover()
            else { continue }
            let fiveTuple = connection.origin.fiveTuple
            let state = HandoverPipe(
                id: id, loop: index, client: fiveTuple.client, server: fiveTuple.server, session: owner.session,
                peer: owner.peer, toPeer: held.toPeer, unpaid: UInt32(held.unpaid), toClient: held.toClient)
            handed.append(HandedPipe(pipe: state, clientFD: connection.socket, peerFD: pipe.socket))
            handingOverPipes.append(connection)
        }
        return handed
    }

    /// The upgrade failed: the paused pipes go on here.
    func resumePipesAfterHandover() {
        for connection in handingOverPipes { connection.resumePipeAfterHandover() }
        handingOverPipes = []
    }

    /// The heir serves the paused pipes: this process lets go of both their sockets, with no
    /// word to the client or the peer. Their entries left the node's table with their
    /// allocation (`TCPRelaySockets.letGoHandedOver`).
    func commitPipes() {
        // One that closed meanwhile (an admin kick ended its allocation) is released as usual.
        for connection in handingOverPipes where connection.state != .closed {
            connections[connection.socket] = nil
            if let pipe = connection.pipe {
                pipes[pipe.id] = nil
                pipe.free()
            }
            service.limiter.release(connection.origin.fiveTuple.client.ip, pending: !connection.hasAllocated)
            counters.open -= 1
            connection.abandon()
        }
        handingOverPipes = []
    }

    /// Serves a pipe the predecessor handed over, before the loops run: its data connection
    /// counts against the connection limits as an allocated one, the client's bytes it held go to
    /// the peer first and the peer's to the client. False, with both sockets closed, when it
    /// cannot be served here.
    func adoptPipe(_ handed: HandoverPipe, clientFD: Int32, peerFD: Int32, account: PipeAccount, now: Int64) -> Bool {
        guard let connection = adoptConnection(handed.fiveTuple, fd: clientFD, now: now) else {
            Glibc.close(peerFD)
            return false
        }
        connectionAllocated(connection)
        pipes[handed.id] = connection
        guard connection.startPipe(id: handed.id, peerSocket: PeerSocket(descriptor: peerFD), account: account) else {
            // The pipe owns the peer's socket now: it closes with the connection.
            connection.close(.error, detail: "cannot register the peer connection")
            return true
        }
        connection.restorePipe(toPeer: handed.toPeer, unpaid: Int(handed.unpaid))
        if !handed.toClient.isEmpty { _ = handed.toClient.withUnsafeBytes { queue($0, on: connection) } }
        return true
    }
}
