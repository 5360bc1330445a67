import Logging
import StunCodec

/// The TURN/STUN protocol state machine of one loop thread (RFC 8489, RFC 8656, RFC 6156).
///
/// Synchronous and single-threaded: the I/O layer hands it packets with their 5-tuple and the
/// loop's cached monotonic time; it answers by queueing packets and commands (`CoreCommand`) in
/// `outbox`, which the I/O layer executes once per loop iteration. It holds typed socket
/// handles and never reads or writes a socket; even a relay socket is opened by a command whose
/// outcome comes back as an input (`relaySocketOpened`). docs/architecture.md.
public final class RelayCore {
    /// The configuration, swapped as a whole on reload (`update(context:)`).
    public private(set) var context: CoreContext
    /// The node's shared tables, fixed when the core was made (docs/architecture.md).
    public let tables: NodeTables
    public let outbox = Outbox()
    /// How this core reaches TCP/TLS connections for the cross-loop short-circuit.
    public var streamHooks = StreamSinkHooks()
    public var counters = CoreCounters()
    public internal(set) var logger: Logger
    /// Whether the calling thread is the loop thread that owns this core; set by the I/O layer,
    /// checked by every entry point in debug builds (`assertOwned`).
    public var ownerCheck: (@Sendable () -> Bool)? = nil

    /// This thread's allocations (RFC 8656 §7), by 5-tuple, relay socket, relayed address and
    /// mobility session; only the table writes those indexes.
    let table = AllocationTable()
    /// This thread's UDP listener socket for each listening address: where packets handed across
    /// threads leave from (the same address the target's client talks to).
    public internal(set) var udpListeners: [(address: TransportAddress, socket: ClientSocket)] = []
    /// NAT behaviour discovery's alternate addresses (RFC 5780), by the UDP listener a request
    /// came in on; rebuilt as listeners are added (docs/nat-discovery.md).
    var discoveries: [TransportAddress: BehaviourDiscovery] = [:]
    /// The EVEN-PORT reservations this thread made (RFC 8656 §7.2, §18.10), swept by this thread
    /// when they expire; the shared `ReservationTable` holds the same entries, so an Allocate on
    /// any thread can take the token (and with it the port's hold in the node's `RelayPortPool`).
    var reservations: [UInt64: ReservationTable.Entry] = [:]
    /// How long EVEN-PORT's R bit holds the next port (RFC 8656 §7.2 leaves it to the server;
    /// 30 s, as coturn).
    static let reservationSeconds: Int64 = 30
    var relayCursor = 0
    /// Mobility's decisions and this thread's count of sealed tickets (RFC 8016).
    var mobility = Mobility()
    /// Allocates waiting for the admission ledger's answer (docs/architecture.md, "Admission").
    var pendingAllocates = PendingAllocates()
    /// Granted Allocates waiting for their relay sockets (`openRelays`).
    var relayOpenings = RelayOpenings()
    /// Allocates of users the user database's view did not have yet, waiting for a lookup.
    var lateUsers = LateUsers()
    /// Whether the I/O layer keeps a state journal (docs/state-journal.md): the core then notes
    /// which UDP allocations changed and ended (`takeJournalRecords`).
    public var journaling = false
    var journal = JournalChanges()
    var random: FastRandom

    /// Bytes the I/O layer must leave free before a peer payload (Data indication header) and after it.
    public static let peerHeadroom = 48
    public static let peerTailroom = 12

    /// Unix time minus the monotonic `now` every call is given: the wall clock, for the rules the
    /// protocol ties to it (REST username expiry, nonce age). The I/O layer refreshes it once a
    /// second; lifetimes, rate limits and bandwidth windows never see it (docs/clocks.md). 0 when
    /// the caller's `now` is unix time already (tests, the fuzzer, the benchmark).
    public var wallOffset: Int64 = 0

    /// Unix time at monotonic `now`.
    @inline(__always)
    func wallTime(_ now: Int64) -> Int64 { now &+ wallOffset }

    /// `seed` drives every choice the core makes at random (nil: from the system); a test that
    /// passes one gets the same ports, tokens and transaction IDs on every run.
    public init(context: CoreContext, logger: Logger, seed: UInt64? = nil) {
        random = FastRandom(seed: seed ?? UInt64.random(in: 1...UInt64.max))
        self.context = context
        tables = context.tables
        self.logger = logger
    }

    var settings: CoreSettings { context.settings }

    /// Replaces the configuration-derived context; live allocations keep their keys and state.
    /// A new peer policy (a reload) applies to live allocations too: channels to a peer it now
    /// denies are unbound (their routes withdrawn), so neither the core nor a data plane outside
    /// it relays to that peer again; Send indications and the peer's packets are checked against
    /// the policy one by one already.
    /// The new context's `tables` are not taken: the core keeps the ones it was made with.
    public func update(context newContext: CoreContext) {
        assertOwned()
        // Tenants' policies are not compared: with tenants, every reload checks the channels.
        let policyChanged =
            newContext.policy != context.policy || newContext.tenants.isMultiTenant || context.tenants.isMultiTenant
        context = newContext
        logger.logLevel = newContext.settings.logLevel
        if policyChanged { unbindDeniedChannels() }
    }

    private func unbindDeniedChannels() {
        // A channel to a relayed address stays: its packets are judged one by one.
        for allocation in table.all {
            // And with tenants, a channel to another tenant's relayed address that the new
            // configuration no longer lets it reach: its route in the kernel checks nothing.
            let tenant = allocation.tenant
            let denied = { (channel: ChannelBinding) in
                !self.allowsLiveRelayed(channel.peer, tenant: tenant)
                    || !self.tenantMayReach(channel.peer, from: tenant, tcp: false)
            }
            guard allocation.channels.contains(where: denied) else { continue }
            withdrawChannelRoutes(of: allocation, where: denied)
            allocation.unbindChannels(where: denied)
            publish(allocation)
        }
    }

    /// Registers this thread's UDP listener on `address` (called by the I/O layer as it opens it).
    public func addUDPListener(_ address: TransportAddress, socket: ClientSocket) {
        assertOwned()
        udpListeners.append((address, socket))
        discoveries = [:]
        for listener in udpListeners {
            discoveries[listener.address] = BehaviourDiscovery(received: listener.address, listeners: udpListeners)
        }
    }

    /// Live allocations on this thread.
    public var allocationCount: Int { table.count }

    /// The allocation of a 5-tuple, if any.
    public func allocation(for fiveTuple: FiveTuple) -> Allocation? { table[fiveTuple] }

    /// Every live allocation (for metrics and shutdown).
    public var allocations: AllocationList { table.all }

    /// Relay ports in use and free on the whole node (every loop shares one `RelayPortPool`).
    public var relayPortsInUse: Int { tables.ports.inUse }
    public var relayPortsFree: Int { tables.ports.free }
    /// Relay ports out of the search for a while because another socket held them.
    public var relayPortsForeign: Int { tables.ports.foreignCount }

    // MARK: Input

    /// A datagram or stream frame from a client: STUN or ChannelData (RFC 7983 demultiplexing).
    public func handleClientPacket(_ bytes: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64) {
        assertOwned()
        guard let first = bytes.first else {
            counters.drop(.malformed)
            return
        }
        switch PacketKind(firstByte: first) {
        case .channelData:
            handleClientChannelData(bytes, from: origin, now: now)
        case .stun:
            handleStun(bytes, from: origin, now: now)
        case .other:
            counters.drop(.notStun)
        }
    }

    func handleStun(_ bytes: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64) {
        let message: StunMessage
        do {
            message = try StunMessage(parsing: bytes)
        } catch {
            if error == .badMagicCookie && settings.rfc3489Compatibility && origin.fiveTuple.transport == .udp
                && !settings.noStun
            {
                handleClassicBinding(bytes, from: origin, now: now)
                return
            }
            counters.drop(.malformed)
            return
        }
        switch message.type.messageClass {
        case .request:
            handleRequest(message, from: origin, now: now)
        case .indication:
            if message.type.method == .send && !settings.stunOnly {
                handleSendIndication(message, from: origin, now: now)
            } else {
                counters.drop(.unexpectedMessage)
            }
        case .successResponse, .errorResponse:
            counters.drop(.unexpectedMessage)
        }
    }

    func handleRequest(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let method = message.type.method
        if method == .binding {
            if settings.noStun {
                counters.drop(.unexpectedMessage)
                return
            }
        } else if settings.stunOnly {
            counters.drop(.unexpectedMessage)
            return
        }
        if let unknown = unknownComprehensionRequired(in: message) {
            sendError(.unknownAttribute, to: message, origin: origin, key: nil) { w throws(StunEncodeError) in
                try w.append(UnknownAttributes(types: unknown))
            }
            return
        }
        switch method {
        case .binding: handleBinding(message, from: origin, now: now)
        case .allocate: handleAllocate(message, from: origin, now: now)
        case .refresh: handleRefresh(message, from: origin, now: now)
        case .createPermission: handleCreatePermission(message, from: origin, now: now)
        case .channelBind: handleChannelBind(message, from: origin, now: now)
        case .connect where settings.tcpRelay: handleConnect(message, from: origin, now: now)
        case .connectionBind where settings.tcpRelay: handleConnectionBind(message, from: origin, now: now)
        default: sendError(.badRequest, to: message, origin: origin, key: nil)
        }
    }

    /// Comprehension-required attributes this server does not understand (RFC 8489 §6.3.1, 420).
    func unknownComprehensionRequired(in message: StunMessage) -> [AttributeType]? {
        var unknown: [AttributeType]? = nil
        var it = message.attributes
        while let a = it.next() {
            guard a.type.isComprehensionRequired && !KnownAttributes.contains(a.type) else { continue }
            if unknown == nil { unknown = [] }
            if unknown!.count < 16 { unknown!.append(a.type) }
        }
        return unknown
    }

    // MARK: Time

    /// Expires allocations, permissions, channels and port reservations; call about once a second.
    public func sweep(now: Int64) {
        assertOwned()
        pendingAllocates.sweep(now: now)
        sweepLateUsers(now: now)
        tables.ports.forgetForeign(now: now)
        var expired: [Allocation] = []
        for allocation in table.all {
            // A dual allocation's two relayed addresses expire each on its own (RFC 8656 §8.1).
            if let additional = allocation.additional, (additional.expiry <= now) != (allocation.expiry <= now) {
                let ended = additional.expiry <= now ? additional.relayedAddress : allocation.relayedAddress
                endRelay(of: ended.ip.family, in: allocation, now: now)
            }
            if allocation.expiry <= now {
                expired.append(allocation)
            } else {
                withdrawEndingChannels(of: allocation, now: now)
                allocation.sweep(now: now)
            }
        }
        for allocation in expired { delete(allocation, reason: .expired, now: now) }
        for (token, reservation) in reservations where reservation.expiry <= now {
            reservations[token] = nil
            journalReservationEnded(token)
            // An Allocate that took the token meanwhile holds the port now; else it goes back.
            if tables.reservations.take(token) != nil {
                tables.ports.release(reservation.port, on: reservation.address)
            }
        }
    }

    /// A TCP/TLS connection closed: its allocation ends with it (RFC 8656 §3.1 over streams).
    public func connectionClosed(_ origin: ClientOrigin, now: Int64) {
        assertOwned()
        if let allocation = table[origin.fiveTuple] { delete(allocation, reason: .connectionClosed, now: now) }
        // An Allocate of this connection still waiting for admission must not allocate when its
        // answer comes (a granted lease then goes straight back).
        pendingAllocates.forget(origin.fiveTuple)
        relayOpenings.cancel(origin.fiveTuple)
        lateUsers.forget(origin.fiveTuple)
    }

    /// Ends every allocation (process exit).
    public func shutdown(now: Int64) {
        assertOwned()
        for allocation in Array(table.all) { delete(allocation, reason: .shutdown, now: now) }
    }

    /// Lists `allocation`'s current state for the other loop threads (after a change to its
    /// permissions, channels or expiry), and notes the change for the state journal; nothing
    /// else to do with a single loop.
    /// A TCP/TLS client's allocation is listed with its connection, or not at all.
    func publish(_ allocation: Allocation) {
        journalChanged(allocation)
        // A TCP allocation's relayed address takes connections, not datagrams (RFC 6062); a DTLS
        // client is reached through its session on this loop only.
        guard context.threadCount > 1, allocation.tcpRelay == nil, allocation.origin.fiveTuple.transport != .dtls
        else { return }
        var sink: (any StreamSink)? = nil
        if allocation.origin.fiveTuple.transport.isStream {
            guard let found = streamHooks.sink?(allocation.origin) else { return }
            sink = found
        }
        tables.directory.publish(allocation, sink: sink)
    }

    /// Ends `allocation` (RFC 8656 §7, §8): out of the table, its channel routes withdrawn, its
    /// relayed addresses closed, its lease released, and `sessionEnded` emitted.
    func delete(_ allocation: Allocation, reason: AllocationEnd, now: Int64) {
        table.remove(allocation)
        journalEnded(allocation)
        forgetMobile(allocation)
        withdrawChannelRoutes(of: allocation)
        if let additional = allocation.additional { closeRelay(additional, of: allocation) }
        closeRelay(allocation.main, of: allocation)
        tables.ledger.release(allocation.lease)
        switch reason {
        case .expired: counters.allocationsExpired += 1
        case .handedOver: break
        default: counters.allocationsDeleted += 1
        }
        if reason == .terminated { counters.allocationsTerminated += 1 }
        outbox.emit(
            .session(.ended(
                SessionSummary(
                    session: allocation.session, fiveTuple: allocation.origin.fiveTuple,
                    relaySocket: allocation.relaySocket, relayed: allocation.advertisedAddress,
                    additionalRelaySocket: allocation.additional?.relaySocket,
                    additionalRelayed: allocation.additional?.advertisedAddress,
                    user: allocation.lease.user, reason: reason,
                    credentials: allocation.credentials,
                    durationSeconds: now - allocation.created,
                    traffic: reason == .handedOver ? allocation.relayedTraffic : allocation.endTraffic(),
                    permissionsUsed: allocation.permissionsUsed, channelsUsed: allocation.channelsUsed,
                    tenant: allocation.lease.tenant, adopted: allocation.adopted, carried: allocation.carried))))
    }
}
