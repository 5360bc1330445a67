import StunCodec

/// A live upgrade hands this core's UDP allocations, and those of TCP and TLS clients whose
/// connections move with them, to another process (docs/live-upgrade.md):
/// the I/O layer passes their relay sockets on with a snapshot (`journalAllocations`), and once
/// the other process serves them this core lets them go.
extension RelayCore {
    /// One relay socket of a UDP allocation: whose (`JournalAllocation.sessionID`), which of its
    /// relayed addresses (RFC 8656 §7.2 step 9), and the socket.
    public struct HandedRelaySocket: Sendable {
        public var session: UInt64
        public var additional: Bool
        public var address: TransportAddress
        public var socket: RelaySocket
    }

    /// A live upgrade pauses this core: the UDP clients' Allocates that still wait (for the
    /// ledger's admission, for relay sockets, or for a user's lookup) are let go, so none
    /// allocates here after the snapshot was taken: such an allocation would stay in this
    /// process while the client's next requests reach the heir, which answers them 437. A granted
    /// lease that comes later goes straight back. The client sends its Allocate again (RFC 8489
    /// §6.2.1), and whichever process reads it then answers. Stream clients' requests stay.
    public func forgetWaitingUDPRequests() {
        assertOwned()
        for fiveTuple in pendingAllocates.fiveTuples where fiveTuple.transport == .udp {
            pendingAllocates.forget(fiveTuple)
        }
        for fiveTuple in relayOpenings.fiveTuples where fiveTuple.transport == .udp {
            relayOpenings.cancel(fiveTuple)
        }
        lateUsers.forget(where: { $0.transport == .udp })
    }

    /// The relay sockets of every UDP client's allocation; TCP, TLS and DTLS clients' allocations
    /// go with their connections, when those move (`streamAllocation`).
    public func udpRelaySockets() -> [HandedRelaySocket] {
        assertOwned()
        var sockets: [HandedRelaySocket] = []
        for allocation in table.all where allocation.origin.fiveTuple.transport == .udp {
            sockets += relaySockets(of: allocation)
        }
        return sockets
    }

    private func relaySockets(of allocation: Allocation) -> [HandedRelaySocket] {
        var sockets = [
            HandedRelaySocket(
                session: allocation.sessionID, additional: false, address: allocation.main.relayedAddress,
                socket: allocation.main.relaySocket)
        ]
        if let additional = allocation.additional {
            sockets.append(
                HandedRelaySocket(
                    session: allocation.sessionID, additional: true, address: additional.relayedAddress,
                    socket: additional.relaySocket))
        }
        return sockets
    }

    /// Whether the TCP or TLS client on `fiveTuple` can move to another process with its
    /// connection: no Allocate of it waits for admission or for relay sockets, and its
    /// allocation, if any, relays over UDP, or over TCP (RFC 6062) when `tcpRelays` allows
    /// that, its control connection is plain TCP, and it has at most
    /// `TCPRelaySnapshot.maxConnections` peer connections. (Whether a TLS session itself can
    /// move is the connection's to say.)
    public func streamClientCanMove(_ fiveTuple: FiveTuple, tcpRelays: Bool = false) -> Bool {
        assertOwned()
        guard fiveTuple.transport.isStream, !pendingAllocates.contains(fiveTuple), !relayOpenings.contains(fiveTuple),
            !lateUsers.holds(fiveTuple)
        else { return false }
        guard let allocation = table[fiveTuple], let state = allocation.tcpRelay else { return true }
        // A TCP allocation whose control connection is TLS stays (docs/live-upgrade.md).
        return tcpRelays && fiveTuple.transport == .tcp && state.peers.count <= TCPRelaySnapshot.maxConnections
    }

    /// The RFC 6062 state of the TCP allocation of the client on `fiveTuple`, with its relay
    /// socket (the listener on its relayed address) and its pipes' count, which pipes on other
    /// loops may still add to; nil for any other client. Its connections are those the node's
    /// `TCPConnectionTable` lists for it now.
    public func tcpRelaySnapshot(_ fiveTuple: FiveTuple)
        -> (snapshot: TCPRelaySnapshot, relaySocket: RelaySocket, piped: PipedTraffic)?
    {
        assertOwned()
        guard let allocation = table[fiveTuple], let state = allocation.tcpRelay else { return nil }
        let piped = state.piped.current
        let connections = tables.tcpConnections.entries(thread: context.loop, relaySocket: allocation.relaySocket)
            .map { entry -> TCPRelaySnapshot.Connection in
                let standing: TCPRelaySnapshot.State
                switch entry.state {
                case .connecting:
                    standing = .connecting(
                        state.pendingConnect(entry.id).map {
                            TCPRelaySnapshot.Connect(
                                method: $0.request.method.rawValue, transactionID: $0.request.transactionID,
                                fingerprinted: $0.request.fingerprinted, key: $0.key)
                        })
                case .ready: standing = .ready
                case .bound(let thread): standing = .piped(loop: UInt16(thread.value))
                }
                return TCPRelaySnapshot.Connection(id: entry.id, peer: entry.peer, deadline: entry.deadline, state: standing)
            }
        let snapshot = TCPRelaySnapshot(
            session: allocation.sessionID, bytesToPeer: piped.bytesToPeer, bytesToClient: piped.bytesToClient,
            connections: connections)
        return (snapshot, allocation.relaySocket, state.piped)
    }

    /// The allocation of the TCP client on `fiveTuple` as the snapshot keeps it, with its relay
    /// sockets; nil when it has none.
    public func streamAllocation(_ fiveTuple: FiveTuple) -> (allocation: JournalAllocation, sockets: [HandedRelaySocket])? {
        assertOwned()
        guard let allocation = table[fiveTuple] else { return nil }
        return (
            JournalAllocation(allocation, allocateResponse: keptAllocateResponse(of: allocation)),
            relaySockets(of: allocation)
        )
    }

    /// Lets go of the allocation of the TCP client on `fiveTuple`, whose connection another
    /// process serves now: it ends with reason `handedOver`, as a UDP client's does.
    public func releaseHandedOverStream(_ fiveTuple: FiveTuple, now: Int64) {
        assertOwned()
        if let allocation = table[fiveTuple] { delete(allocation, reason: .handedOver, now: now) }
    }

    /// The ports this core holds for EVEN-PORT's R bit (RFC 8656 §7.2) that no Allocate has
    /// taken yet, by RESERVATION-TOKEN (§18.10): for a compacted journal, or for the process a
    /// live upgrade hands them to.
    public func liveReservations() -> [UInt64: JournalReservation] {
        assertOwned()
        var handed: [UInt64: JournalReservation] = [:]
        for (token, entry) in reservations where tables.reservations.contains(token) {
            handed[token] = JournalReservation(
                address: TransportAddress(ip: entry.address, port: entry.port), expiresAt: entry.expiry)
        }
        return handed
    }

    /// Holds `reservation`'s port for a later Allocate with `token`, as the process that
    /// reserved it did. False, changing nothing, when it has expired, its address is not one of
    /// this node's relay addresses, or the port is taken (an Allocate took the token as the
    /// other process paused: the allocation holds the port). Its expiry is never later than a
    /// reservation made here would have (30 s).
    @discardableResult
    public func adoptReservation(token: UInt64, _ reservation: JournalReservation, now: Int64) -> Bool {
        assertOwned()
        let address = reservation.address
        guard reservation.expiresAt > now,
            context.relayAddresses.contains(where: { $0.bound == address.ip }),
            tables.ports.claim(address.port, on: address.ip, as: .reservation)
        else { return false }
        let entry = ReservationTable.Entry(
            address: address.ip, port: address.port, expiry: min(reservation.expiresAt, now + Self.reservationSeconds))
        reservations[token] = entry
        tables.reservations.insert(token, entry)
        journalReserved(token, entry)
        return true
    }

    /// Lets go of every UDP client's allocation, now served by another process: each ends with
    /// reason `handedOver` (its relay sockets closed here, its ports and lease given back), the
    /// reservations go (the other process holds their ports), and the UDP listeners are
    /// forgotten. How many allocations ended.
    @discardableResult
    public func releaseHandedOver(now: Int64) -> Int {
        assertOwned()
        let handed = table.all.filter { $0.origin.fiveTuple.transport == .udp }
        for allocation in handed { delete(allocation, reason: .handedOver, now: now) }
        for (token, entry) in reservations where tables.reservations.take(token) != nil {
            tables.ports.release(entry.port, on: entry.address)
        }
        reservations = [:]
        udpListeners.removeAll()
        discoveries = [:]
        return handed.count
    }
}
