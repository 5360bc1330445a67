import StunCodec

/// The input that adopts an allocation whose relay sockets are open already (docs/architecture.md,
/// "Relay sockets"): the counterpart of `openRelaySocket` for a handover or a restore.
extension RelayCore {
    /// Serves `adopted` from now on: its ports are held in the node's pool, the ledger counts it
    /// (never refusing it: it is live already), its channels' routes are installed again, and a
    /// session start is announced. Throws, changing nothing, when it cannot be served here; the
    /// caller then closes its sockets.
    public func adopt(_ adopted: AdoptedAllocation, now: Int64) throws(AdoptionRefusal) {
        assertOwned()
        let fiveTuple = adopted.origin.fiveTuple
        guard fiveTuple.transport != .dtls else { throw .transportCannotMove }
        guard table[fiveTuple] == nil, !relayOpenings.contains(fiveTuple) else { throw .fiveTupleInUse }
        let relays = [adopted.main] + (adopted.additional.map { [$0] } ?? [])
        guard relays.allSatisfy({ $0.secondsLeft > 0 }) else { throw .expired }
        var claimed: [TransportAddress] = []
        let holder: RelayPortPool.Holder = adopted.tcpRelay == nil ? .udpAllocation : .tcpAllocation
        for relay in relays {
            guard context.relayAddresses.contains(where: { $0.bound == relay.bound.ip }),
                tables.ports.claim(relay.bound.port, on: relay.bound.ip, as: holder)
            else {
                for address in claimed { tables.ports.release(address.port, on: address.ip) }
                throw .portUnavailable(relay.bound)
            }
            claimed.append(relay.bound)
        }
        // The tenant is found again by the `<tenant>/` prefix of its quota user (docs/tenants.md).
        let tenant = context.tenants.index(ofQuotaUser: adopted.user)
        let lease = tables.ledger.readmit(
            AdmissionLease(
                user: adopted.user, bytesPerSecond: adopted.bytesPerSecond, tenant: context.tenants.name(of: tenant)))
        func endpoint(_ relay: AdoptedAllocation.Relay) -> RelayEndpoint {
            RelayEndpoint(
                relayedAddress: relay.bound, advertisedAddress: advertisedForm(of: relay.bound), relaySocket: relay.socket,
                expiry: now + relay.secondsLeft)
        }
        let allocation = Allocation(
            origin: adopted.origin, main: endpoint(adopted.main), username: adopted.username, key: adopted.key,
            transactionID: adopted.transactionID, now: now, lease: lease)
        allocation.additional = adopted.additional.map(endpoint)
        allocation.allocateResponse = adopted.allocateResponse
        allocation.credentials = adopted.credentials
        allocation.dontFragment = adopted.dontFragment
        allocation.tenant = tenant
        allocation.adopted = true
        noteTenant(of: allocation)
        if let tcpRelay = adopted.tcpRelay {
            allocation.bandwidth = tcpRelay.account.budget
            allocation.tcpRelay = adoptConnections(tcpRelay, of: allocation, username: bindIdentity(of: allocation))
            allocation.carried = tcpRelay.account.traffic.current
        } else if lease.bytesPerSecond > 0 {
            allocation.bandwidth = BandwidthBudget(bytesPerSecond: lease.bytesPerSecond)
        }
        for permission in adopted.permissions where permission.secondsLeft > 0 {
            allocation.installPermission(permission.peer, until: now + permission.secondsLeft)
        }
        for channel in adopted.channels where channel.secondsLeft > 0 {
            allocation.bindChannel(channel.number, to: channel.peer, until: now + channel.secondsLeft)
        }
        allocation.sessionID = adopted.sessionID
        allocation.moves = adopted.moves
        if adopted.mobile { registerMobile(allocation) }
        table.insert(allocation)
        // What a handed-over socket queued meanwhile is for live permissions: read, not dropped.
        watchRelaySockets(of: allocation, drain: false)
        publish(allocation)
        announceChannels(of: allocation, peerIPs: nil, now: now)
        outbox.emit(
            .session(.started(
                SessionStart(
                    session: allocation.session, fiveTuple: fiveTuple, clientSocket: allocation.origin.socket,
                    relayed: allocation.advertisedAddress, bound: allocation.relayedAddress,
                    additionalRelayed: allocation.additional?.advertisedAddress, user: adopted.user,
                    credentials: adopted.credentials, lifetimeSeconds: adopted.main.secondsLeft, adopted: true,
                    tenant: allocation.lease.tenant))))
    }

    /// A handed-over TCP allocation's peer connections, listed in the node's shared table as
    /// they stood: a connect in progress (its Connect answered when it ends), a connection ready
    /// for its ConnectionBind, or a pipe on the loop that took its data connection.
    private func adoptConnections(_ adopted: AdoptedTCPRelay, of allocation: Allocation, username: String)
        -> TCPRelayState
    {
        var state = TCPRelayState(piped: adopted.account.traffic)
        for connection in adopted.snapshot.connections {
            let standing: TCPConnectionTable.State
            var waiting: PendingConnect? = nil
            switch connection.state {
            case .connecting(let connect):
                standing = .connecting
                waiting = connect.map {
                    PendingConnect(
                        request: ReplyTarget(
                            method: Method(rawValue: $0.method), transactionID: $0.transactionID,
                            fingerprinted: $0.fingerprinted),
                        key: $0.key)
                }
            case .ready:
                guard let socket = adopted.readySockets[connection.id] else { continue }
                standing = .ready(peerSocket: socket)
            case .piped(let loop):
                standing = .bound(thread: LoopIndex(Int(loop)))
            }
            // The ids come from one process's table, and this one lists none before its loops
            // run: an id is never taken here.
            let listed = tables.tcpConnections.adopt(
                TCPConnectionTable.Entry(
                    id: connection.id, thread: context.loop, relaySocket: allocation.relaySocket, username: username,
                    peer: connection.peer, account: adopted.account, state: standing, deadline: connection.deadline))
            if listed { state.adopted(connection.id, peer: connection.peer, waiting: waiting) }
        }
        return state
    }
}
