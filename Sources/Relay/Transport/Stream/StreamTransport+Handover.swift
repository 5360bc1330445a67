import CStreamIO
import Glibc
import RelayCore
import StunCodec

/// A TCP or TLS connection on its way to the heir of a live upgrade: its state, its socket, and
/// its allocation with the allocation's relay sockets.
struct HandedConnection {
    var stream: HandoverStream
    var fd: Int32
    var allocation: JournalAllocation?
    var relaySockets: [RelayCore.HandedRelaySocket]
    /// A TCP allocation's RFC 6062 state, and the sockets of its peer connections that are
    /// connecting or ready (its pipes move with their own loops).
    var tcpRelay: TCPRelaySnapshot?
    var peers: [TCPRelaySockets.HandedPeer] = []
    /// The count its pipes add to, read again once they paused.
    var piped: PipedTraffic?
}

// TCP and TLS clients in a live upgrade (docs/live-upgrade.md, "TCP clients", "TLS clients").
// A TLS connection moves once relayd keeps its records (TLS 1.3); one OpenSSL still serves stays:
// OpenSSL cannot move a session.
extension StreamTransport {
    /// Pauses every TCP connection that can move (`RelayCore.streamClientCanMove`, and little
    /// enough held here) and returns them for the heir. With `tcpRelays`, so do the control
    /// connections of TCP allocations (RFC 6062), with their listeners and their peer
    /// connections that are not piped; with `tls`, TLS connections whose records relayd keeps.
    func pauseForHandover(loop index: UInt16, tcpRelays: Bool, tls: Bool) -> [HandedConnection] {
        let core = loop.core!
        var handed: [HandedConnection] = []
        for connection in connections.values
        where (connection.transport == .tcp || (tls && connection.transport == .tls)) && connection.pipe == nil
            && core.streamClientCanMove(connection.origin.fiveTuple, tcpRelays: tcpRelays)
        {
            // The tenant its TLS server name chose goes by name (a longer one than the message
            // carries stays here).
            let tenant = core.context.tenants.name(of: Int(connection.origin.serverNameTenant))
            guard tenant.utf8.count <= HandoverTLSSession.maxTenantBytes,
                let held = connection.pauseForHandover()
            else { continue }
            let fiveTuple = connection.origin.fiveTuple
            let allocation = core.streamAllocation(fiveTuple)
            let session = held.records.map { HandoverTLSSession(records: $0, tenant: tenant) }
            let stream = HandoverStream(
                id: UInt64(connection.socket), loop: index, client: fiveTuple.client, server: fiveTuple.server,
                session: allocation?.allocation.sessionID ?? 0, input: held.input, output: held.output, tls: session)
            var moving = HandedConnection(
                stream: stream, fd: connection.socket, allocation: allocation?.allocation,
                relaySockets: allocation?.sockets ?? [])
            if let (snapshot, relaySocket, piped) = core.tcpRelaySnapshot(fiveTuple) {
                moving.tcpRelay = snapshot
                moving.piped = piped
                moving.peers = loop.tcpRelay.pauseForHandover(relaySocket)
            }
            handed.append(moving)
            handingOver.append(connection)
        }
        return handed
    }

    /// The upgrade failed: the paused connections go on here, except, with `endingTLSSessions`,
    /// the TLS ones: the heir may have sealed records under their keys, and one sealed here at
    /// the same sequence number would reuse its nonce (RFC 8446 §5.3). They close without a
    /// word (no close_notify, nothing flushed), their clients' allocations with them.
    func resumeAfterHandover(endingTLSSessions: Bool = false) {
        for connection in handingOver {
            if endingTLSSessions, connection.isTLS {
                connection.close(.error, detail: "a failed live upgrade may have used the session's keys")
            } else {
                connection.resumeAfterHandover()
            }
        }
        handingOver = []
        resumePipesAfterHandover()
    }

    /// The heir serves the paused connections: their allocations end here with reason
    /// `handedOver`, and this process lets go of them without a word to the client.
    func commitHandover(now: Int64) {
        commitPipes()
        for connection in handingOver where connection.state != .closed {
            let origin = connection.origin
            connections[origin.socket.descriptor] = nil
            if connection.proxied { proxiedTuples.remove(origin.fiveTuple) }
            loop.core.releaseHandedOverStream(origin.fiveTuple, now: now)
            service.limiter.release(origin.fiveTuple.client.ip, pending: !connection.hasAllocated)
            counters.open -= 1
            connection.abandon()
        }
        handingOver = []
    }

    /// Serves a connection the predecessor handed over, before the loops run: it counts against
    /// the connection limits, keeps the part frame read so far, and has its queued output
    /// written first. The client's origin, or nil when the connection cannot be served here
    /// (the socket is closed then).
    func adopt(_ handed: HandoverStream, fd: Int32, now: Int64) -> ClientOrigin? {
        var records: OpaquePointer?
        var serverNameTenant: UInt16 = 0
        if let tls = handed.tls {
            // The tenant its server name chose must still be configured; the records must be whole.
            let tenant = tls.tenant.isEmpty ? 0 : loop.core.context.tenants.index(named: tls.tenant)
            records = tenant == 0 && !tls.tenant.isEmpty ? nil : tls.records.withUnsafeBytes {
                relayd_tls_records_import($0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
            }
            guard records != nil else {
                Glibc.close(fd)
                return nil
            }
            serverNameTenant = UInt16(clamping: tenant)
        }
        guard let connection = adoptConnection(handed.fiveTuple, fd: fd, now: now) else {
            relayd_tls_records_free(records)
            return nil
        }
        connection.origin.serverNameTenant = serverNameTenant
        handed.input.withUnsafeBytes { connection.keepPartial($0) }
        // Sealed already (TLS): queued as they are, before the records take over.
        if !handed.output.isEmpty { _ = handed.output.withUnsafeBytes { queue($0, on: connection) } }
        if let records { connection.adoptRecords(records) }
        return connection.origin
    }

    /// A TCP or TLS connection on `fd` the predecessor handed over, counted against the
    /// connection limits and read from now on (as plain TCP until `adoptRecords`); nil, with
    /// the socket closed, when nothing here serves TCP or the connection cannot be made.
    func adoptConnection(_ fiveTuple: FiveTuple, fd: Int32, now: Int64) -> StreamConnection? {
        guard !listeners.isEmpty else {
            // No TCP listener in this configuration: nothing here serves TCP.
            Glibc.close(fd)
            return nil
        }
        let ip = fiveTuple.client.ip
        service.limiter.adopt(ip)
        let origin = ClientOrigin(fiveTuple: fiveTuple, socket: ClientSocket(descriptor: fd))
        guard let connection = StreamConnection(socket: fd, ssl: nil, origin: origin, owner: self, now: now) else {
            Glibc.close(fd)
            service.limiter.release(ip, pending: true)
            return nil
        }
        connection.sawValidStun = true
        connections[fd] = connection
        counters.open += 1
        connection.start(base: loop.base)
        return connection
    }
}
