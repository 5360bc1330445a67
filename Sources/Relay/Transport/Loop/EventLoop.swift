import RelayCore
import CLibevent
import FastPath
import Glibc
import Logging
import StunCodec

/// One loop thread: its own libevent `event_base`, its own SO_REUSEPORT listener sockets, its
/// own `RelayCore` and relay sockets. Nothing here is shared with other threads, so the data
/// path takes no locks. Packets are read in batches (recvmmsg), handed to the core, and the
/// core's outbox is flushed in batches (sendmmsg) before the next read.
final class EventLoop {
    let base: OpaquePointer
    let logger: Logger
    private(set) var core: RelayCore!
    let batch: DatagramBatch
    let sender: SendBatch
    var listeners: [(fd: Int32, address: TransportAddress, event: OpaquePointer)] = []
    /// UDP listeners that take DTLS too (a TLS port plain UDP uses, docs/dtls.md).
    var dtlsShared: Set<Int32> = []
    /// Connected sockets that bring moved mobile clients' datagrams to this loop (also in
    /// `listeners`), by the client's 5-tuple (docs/mobility.md).
    var steered: [FiveTuple: Int32] = [:]
    /// For each of those sockets, this loop's listener on the same address.
    var steeredAnswer: [Int32: Int32] = [:]
    var relayEvents: [Int32: OpaquePointer] = [:]
    /// Relay sockets the core asked to watch whose event could not be made (out of memory):
    /// tried again every second (`retryRelayWatches`) until watched or closed.
    var relayWatchRetries: Set<Int32> = []
    /// Fault injection for tests: a relay-socket watch fails, as if libevent were out of memory,
    /// when this says so (nil in the daemon).
    var relayWatchFault: (() -> Bool)?
    var timer: LoopEvent?
    var pendingClose: [Int32] = []
    /// Relay sockets opened by this flush's `openRelaySocket` commands, answered to the core
    /// when the flush is done (`answerRelayOpens`).
    var relayOpens: [(open: RelaySocketOpen, opening: RelaySocketOpening)] = []
    /// Datagrams a moved client sent from its old address before the move, read from its old
    /// socket by `steer` and handed to the core after the flush (`carryOver`).
    var carried: [(bytes: [UInt8], origin: ClientOrigin)] = []
    /// This loop's place among the node's loops and the node-wide services it uses, given when
    /// it is made.
    let wiring: LoopWiring
    /// Publishes a metrics snapshot every `publishInterval` and once at the end of `run()`
    /// (the scrape shows traffic within that interval).
    var publishTimer: LoopEvent?
    /// Mail from other threads (contexts, forwarded requests, admission decisions, admin
    /// requests, pipes to end), and the event that wakes this loop for it.
    var mailbox: LoopMailbox { wiring.mailboxes[wiring.index.value] }
    var mailboxEvent: OpaquePointer?
    static let publishInterval = timeval(tv_sec: 0, tv_usec: 250_000)
    /// Reads per readiness event before yielding to other sockets.
    let batchesPerWakeup = 4
    /// Receive slots holding payloads that queued packets still point into (relay sockets'
    /// reads since the last flush). Relay sockets read into the slots after them, so the
    /// answers to every relay socket ready in one loop iteration leave in one sendmmsg.
    var slotsInUse = 0
    /// Activated when relay-socket reads queued packets: runs after the iteration's other
    /// ready events and flushes them all at once.
    var flushEvent: LoopEvent?
    /// The kernel fast path's routes of this loop (`kernel-offload`); nil: the core relays every packet.
    let fastPath: FastPathRoutes?
    /// The RFC 6062 pipes' sockmap program, when it runs (docs/tcp-relay.md, "In the kernel").
    let splice: KernelSplice?
    /// TCP allocations' listeners and connects (RFC 6062, docs/tcp-relay.md).
    lazy var tcpRelay = TCPRelaySockets(loop: self)
    /// TCP and TLS clients (RFC 8656 §3.1, RFC 6062 data connections), and DTLS clients
    /// (docs/dtls.md): owned by this loop, made with it, listening once `start` opens them.
    lazy var stream = StreamTransport(loop: self, service: wiring.streams)
    lazy var dtls = DTLSTransport(loop: self, service: wiring.streams)
    /// Sessions' metrics (allocation lifetimes), one of `sessionObservers`.
    let sessionMetrics = SessionMetrics()
    /// The state journal of this loop's UDP allocations (docs/state-journal.md); nil without a
    /// `state-dir`.
    var journal: LoopJournal?
    /// Writes the journal after the callbacks of this loop iteration (`flush` activates it).
    var journalEvent: LoopEvent?
    var journalPending = false
    /// What the kernel relayed for allocations whose routes a flush removed, until their end is
    /// logged in the same flush (`perform`); kept here so a flush makes no dictionary.
    var endedRelayed: [RelaySocket: KernelFastPath.Counters] = [:]
    /// Between a live upgrade's pause and its resume or commit (`EventLoop+Handover`): the UDP
    /// listeners and relay sockets are not read.
    var handingOver = false
    /// What `restore()` did, for the metrics.
    var restoreCounts = (restored: UInt64(0), notRestored: UInt64(0))
    /// Who follows this loop's sessions (docs/architecture.md, "Session events"): the log, the
    /// metrics, then the wiring's own, in that order.
    private(set) var sessionObservers: [any SessionObserver] = []

    init(context: CoreContext, logger: Logger, wiring: LoopWiring) {
        base = EventLoop.makeBase()
        self.logger = logger
        self.wiring = wiring
        fastPath = wiring.fastPath.map(FastPathRoutes.init)
        splice = wiring.splice
        batch = DatagramBatch(headroom: RelayCore.peerHeadroom, tailroom: RelayCore.peerTailroom)
        sender = SendBatch(capacity: 256)
        core = RelayCore(context: context, logger: logger)
        core.wallOffset = EventLoop.wallOffset()
        // The thread that makes the loop runs it (docs/architecture.md, "Threads").
        let owner = pthread_self()
        core.ownerCheck = { pthread_equal(owner, pthread_self()) != 0 }
        sessionObservers = [SessionLog { [unowned self] in core.logger }, sessionMetrics] + wiring.sessionObservers()
        journal = wiring.journal.map { LoopJournal(path: $0.path, bootID: $0.bootID, keys: $0.keys, logger: logger) }
        core.journaling = journal != nil
    }

    deinit {
        for l in listeners {
            event_free(l.event)
            close(l.fd)
        }
        for (fd, event) in relayEvents {
            event_free(event)
            close(fd)
        }
        timer = nil
        publishTimer = nil
        flushEvent = nil
        if let mailboxEvent {
            mailbox.detach()
            event_free(mailboxEvent)
        }
        event_base_free(base)
    }

    var opaqueSelf: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Opens this thread's UDP listener on `address`; false if it cannot be bound.
    func addUDPListener(_ address: TransportAddress) -> Bool {
        let inherited = wiring.inheritance?.listener(.udpListener, loop: wiring.index.value, address: address)
        guard let fd = inherited ?? UDPSocket.open(bound: address, reusePort: true) else { return false }
        // The group's datagrams go to the loops' listeners only, by client (docs/mobility.md).
        if relayd_attach_listener_selector(fd, address.ip.family == .ipv6 ? 1 : 0, UInt32(core.context.threadCount)) != 0 {
            logger.warning(
                "cannot attach the listener selector; moved mobile clients may reach other loops",
                metadata: ["event": "listener_selector_failed", "address": "\(address)"])
        }
        let event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().listenerReadable(fd)
        }, opaqueSelf)!
        event_add(event, nil)
        listeners.append((fd, address, event))
        if wiring.streams.dtlsSharedAddresses.contains(address) { dtlsShared.insert(fd) }
        core.addUDPListener(address, socket: ClientSocket(descriptor: fd))
        return true
    }

    /// Opens this loop's listeners: UDP on `udp`, then the TCP, TLS and DTLS ones of the stream
    /// service. The failure to report, if any.
    func start(udp addresses: [TransportAddress]) -> String? {
        publishMetrics()
        for address in addresses where !addUDPListener(address) {
            return "cannot bind UDP \(address): \(String(cString: strerror(errno)))"
        }
        return stream.start() ?? dtls.start()
    }

    /// Closes the transports' listeners and connections, after `run()` returned (or instead of
    /// it, when `start` failed).
    func shutdownTransports() {
        dtls.shutdown()
        stream.shutdown()
    }

    /// Runs until `stop()`; sweeps expired state once a second.
    func run() {
        timer = LoopEvent(base: base, every: timeval(tv_sec: 1, tv_usec: 0)) { [unowned self] in tick() }
        if wiring.metrics != nil {
            publishTimer = LoopEvent(base: base, every: EventLoop.publishInterval) { [unowned self] in publishMetrics() }
        }
        mailboxEvent = event_new(base, -1, 0, { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().applyMail()
        }, opaqueSelf)
        mailbox.attach(mailboxEvent!)
        applyMail()
        flushEvent = LoopEvent(base: base) { [unowned self] in flush() }
        if let journal {
            journalEvent = LoopEvent(base: base) { [unowned self] in
                journalPending = false
                journal.write(core, now: EventLoop.now())
            }
        }
        event_base_dispatch(base)
        mailbox.detach()
        core.shutdown(now: EventLoop.now())
        flush()
        journalEvent = nil
        // Every allocation ended: nothing is left to restore.
        journal?.remove()
        tcpRelay.shutdown()
        publishMetrics()
    }

    /// An event base whose epoll backend batches interest changes (the changelist): the changes
    /// of one iteration reach the kernel together before the next epoll_wait, and an event added
    /// and removed again in between costs no epoll_ctl at all. relayd never dup(2)s a descriptor
    /// it registers, the changelist's one caveat.
    static func makeBase() -> OpaquePointer {
        let config = event_config_new()
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        return event_base_new_with_config(config) ?? event_base_new()
    }

    /// Asks the loop to return from `run()`; safe from another thread (libevent pthreads locking).
    func stop() { event_base_loopexit(base, nil) }

    /// Seconds on the monotonic clock that also counts suspended time (CLOCK_BOOTTIME): every
    /// lifetime, deadline, rate limit and bandwidth window runs on it, so a wall-clock step (NTP,
    /// an operator's `date -s`) moves none of them (docs/clocks.md).
    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return Int64(ts.tv_sec)
    }

    /// Unix time minus `now()`: what the core adds for the few rules the protocol ties to the
    /// wall clock (REST expiry, nonces).
    static func wallOffset() -> Int64 { Int64(time(nil)) - now() }

    /// Applies what other threads posted, in order: a new context is swapped in (live
    /// allocations keep their state), forwarded requests and admission decisions go to the core,
    /// admin requests are answered, pipes ended.
    func applyMail() {
        let mail = mailbox.take()
        guard !mail.isEmpty else { return }
        let now = EventLoop.now()
        for item in mail {
            if slotsInUse > 0 { flush() }
            switch item {
            case .context(let context): core.update(context: context)
            case .forwarded(let request):
                // Paused for a live upgrade, this loop's allocations are already in the heir's
                // snapshot: a request applied now (an RFC 8016 move, a Refresh) would be lost
                // with the old process. It is let go; its client retransmits to the heir, or
                // to this process if the upgrade fails (docs/live-upgrade.md).
                guard !handingOver else { continue }
                // A handed-over request may move an allocation of this loop: what its client
                // sent before it, already queued on this loop's sockets, goes first.
                readClientSockets()
                core.handleForwardedRequest(request.bytes, from: request.origin, now: now)
            case .admission(let answer): core.resumeAllocate(answer.ticket, decision: answer.decision, now: now)
            case .userLookedUp(let lookup, let result):
                switch result {
                case .found(let md5): core.userLookedUp(lookup, md5: md5, now: now)
                case .missing: core.userLookedUp(lookup, md5: nil, now: now)
                case .failed: core.userLookedUp(lookup, md5: nil, failed: true, now: now)
                }
            case .admin(let task): serve(task)
            case .closePipe(let id): stream.endPipe(id)
            case .handover(let step): handover(step)
            case .journalKeys(let keys):
                if let journal {
                    journal.keys = keys
                    journal.compact(core, now: EventLoop.now())
                }
            }
            if core.outbox.needsFlush { flush() }
        }
        flush()
    }

    /// Posts `mail` to loop `loop` of this node (this one included); nothing when no such loop.
    func post(_ mail: LoopMail, to loop: LoopIndex) {
        guard wiring.mailboxes.indices.contains(loop.value) else { return }
        wiring.mailboxes[loop.value].post(mail)
    }

    func tick() {
        core.wallOffset = EventLoop.wallOffset()
        collectFastPathTraffic()
        // Not while a live upgrade pauses the loop: the heir may be reading those sockets.
        if !relayWatchRetries.isEmpty, !handingOver { retryRelayWatches() }
        // While a live upgrade pauses this loop, nothing expires here: an allocation or peer
        // connection that ended would close a socket the heir is about to receive. The heir
        // expires what is due as it adopts it (docs/live-upgrade.md).
        if !handingOver {
            core.sweep(now: EventLoop.now())
            tcpRelay.sweep(now: EventLoop.now())
        }
        flush()
        journal?.compactIfDue(core, now: EventLoop.now())
    }

    // MARK: Reading

    /// Reads what every client socket of this loop (listeners and moved clients' sockets) has
    /// queued, up to the usual budget per socket (`batchesPerWakeup`).
    func readClientSockets() {
        guard !handingOver else { return }
        for fd in listeners.map(\.fd) { listenerReadable(fd) }
    }

    func listenerReadable(_ fd: Int32) {
        guard let listener = listeners.first(where: { $0.fd == fd }) else { return }
        // The listener reads whole batches from slot 0: send what relay reads queued first.
        if slotsInUse > 0 { flush() }
        let now = EventLoop.now()
        // A moved client's socket reads, but answers (and every allocation's origin) use this
        // loop's listener: the moved client's socket may close at any flush (docs/mobility.md).
        let steeredTo = steeredAnswer[fd]
        let answering = ClientSocket(descriptor: steeredTo ?? fd)
        // A port DTLS shares: its datagrams (first byte 20 to 63, RFC 7983 §7) go to the DTLS
        // cookie exchange (docs/dtls.md).
        let demultiplex = dtlsShared.contains(fd)
        for _ in 0..<batchesPerWakeup {
            // A flush below may have closed a moved client's socket (`steer` forgets it at once).
            if steeredTo != nil && steeredAnswer[fd] == nil { return }
            let n = batch.receive(from: fd)
            if n == 0 { break }
            for i in 0..<n {
                guard let length = batch.length(i), let client = SocketAddress.read(batch.source(i)) else {
                    core.counters.drop(.malformed)
                    continue
                }
                let slot = batch.slot(i)
                let bytes = UnsafeRawBufferPointer(rebasing: slot[batch.headroom..<batch.headroom + length])
                if demultiplex, length > 0, (20...63).contains(bytes[0]) {
                    dtls.sharedDatagram(bytes, source: batch.source(i), listener: fd, on: listener.address)
                    continue
                }
                let origin = ClientOrigin(
                    fiveTuple: FiveTuple(client: client, server: listener.address, transport: .udp),
                    socket: answering)
                core.handleClientPacket(bytes, from: origin, now: now)
                if core.outbox.needsFlush { flush() }
            }
            flush()
            if n < batch.count { break }
        }
    }

    /// A relay socket is readable: peers' datagrams for one allocation, usually one or two. They
    /// are read into the free slots after `slotsInUse` and framed in place; the packets for the
    /// clients wait for the flush at the end of the loop iteration (or until slots run out), so
    /// many allocations' traffic shares one sendmmsg on the listener.
    func relayReadable(_ fd: Int32) {
        let now = EventLoop.now()
        for _ in 0..<batchesPerWakeup {
            if batch.count - slotsInUse < DatagramBatch.minimumFreeSlots { flush() }
            let first = slotsInUse
            let n = batch.receive(from: fd, slots: first..<batch.count)
            if n == 0 {
                // Nothing to read, yet readable: the error queue holds ICMP errors (EPOLLERR).
                relayErrors(fd, now: now)
                break
            }
            for i in first..<first + n {
                guard let length = batch.length(i), let peer = SocketAddress.read(batch.source(i)) else {
                    core.counters.drop(.malformed)
                    continue
                }
                core.handlePeerPacket(
                    relaySocket: RelaySocket(descriptor: fd), from: peer, buffer: batch.slot(i), payload: batch.headroom..<batch.headroom + length,
                    now: now)
                if core.outbox.needsFlush { flush() }
            }
            // Set after the loop: a flush inside it resets the count while later packets of
            // this batch, queued after it, still point into slots up to `first + n`.
            slotsInUse = first + n
            if n < batch.count - first { break }
        }
        if !core.outbox.packets.isEmpty { flushEvent?.activate() }
    }

    // MARK: Writing

    /// Carries out the core's output in order; the relay sockets it opened are then answered to
    /// the core, whose answers (the Allocate responses, or the next port to try) go out the same way.
    func flush() {
        flushOutbox()
        while !relayOpens.isEmpty {
            answerRelayOpens()
            flushOutbox()
        }
    }

    private func answerRelayOpens() {
        let opens = relayOpens
        relayOpens.removeAll(keepingCapacity: true)
        let now = EventLoop.now()
        for (open, opening) in opens { core.relaySocketOpened(open, opening, now: now) }
    }

    /// Carries out the core's output stream in order (docs/architecture.md, "The command
    /// flow"). UDP packets are staged and leave in one sendmmsg per socket when the stream ends
    /// (or a batch fills): staging delays a packet, never moves it ahead of a command the core
    /// emitted before it, so a channel's route or a moved client's socket is in place before the
    /// answer that confirms it can arrive. Descriptors closed in the flush close at its end.
    private func flushOutbox() {
        let outbox = core.outbox
        slotsInUse = 0
        // Write-ahead: the records of what the core changed go to the journal before any answer
        // that confirms it leaves, so a client that got its Allocate's success finds the
        // allocation after a crash (docs/state-journal.md, "In a state-dir").
        if let journal, core.hasJournalChanges { journal.write(core, now: EventLoop.now()) }
        defer { if !pendingClose.isEmpty { closePending() } }
        var staging = Staging()
        outbox.forEachInOrder(
            packet: { stage($0, in: &staging) },
            command: { perform($0, ended: &endedRelayed) })
        if !endedRelayed.isEmpty { endedRelayed.removeAll() }
        if staging.count > 0 { sender.send(count: staging.count, from: staging.fd) }
        outbox.reset()
        // What the commands of this flush changed: once per loop iteration (`journalEvent`).
        if let journalEvent, !journalPending, core.hasJournalChanges {
            journalPending = true
            journalEvent.activate()
        }
        if !carried.isEmpty { carryOver() }
    }

    /// UDP packets staged for one sendmmsg: how many, and the socket they leave from.
    struct Staging {
        var count = 0
        var fd: Int32 = -1
    }

    /// Sends a stream or DTLS client's packet at once (queued on its connection), and stages a
    /// UDP one; what is staged for another socket, or a full batch, leaves first.
    private func stage(_ packet: OutboundPacket, in staging: inout Staging) {
        let fd: Int32
        let destination: TransportAddress
        switch packet.route {
        case .client(let origin):
            guard origin.fiveTuple.transport == .udp else {
                if origin.fiveTuple.transport == .dtls {
                    dtls.send(packet.bytes, to: origin)
                } else {
                    stream.send(packet.bytes, to: origin)
                }
                return
            }
            fd = origin.socket.descriptor
            destination = origin.fiveTuple.client
        case .peer(let relaySocket, let peer):
            fd = relaySocket.descriptor
            destination = peer
            if packet.dontFragment {
                // Alone, in order: what is staged before it leaves first.
                if staging.count > 0 { sender.send(count: staging.count, from: staging.fd) }
                staging.count = 0
                sender.sendDontFragment(packet.bytes, to: peer, from: fd)
                return
            }
        }
        if fd != staging.fd || staging.count == sender.capacity {
            if staging.count > 0 { sender.send(count: staging.count, from: staging.fd) }
            staging.count = 0
            staging.fd = fd
        }
        sender.stage(staging.count, bytes: packet.bytes, to: destination)
        staging.count += 1
    }
}
