import CHandover
import FastPath
import Foundation
import Glibc
import RelayCore
import StunCodec

/// The running side of a live upgrade (docs/live-upgrade.md): SIGUSR2 or `POST /api/v1/upgrade`
/// starts the binary again, hands it the listeners, the UDP allocations, the TCP clients and the
/// TLS 1.3 clients whose records relayd keeps, TCP allocations (RFC 6062) with their pipes, the
/// keys, limiters and counters, and once it serves, lets go and drains what cannot move (DTLS
/// clients, TLS sessions OpenSSL keeps, pipes over TLS).
extension RelayServer {
    /// Main-thread state of live upgrades.
    struct HandoverState {
        /// This process handed over: it serves what stayed until it leaves, and hands over no more.
        var done = false
        /// The channel to the heir, kept open until this process exits: its end tells the heir
        /// that the ports of this process's allocations are free.
        var channel: HandoverChannel?
        /// An heir's watch for its predecessor's exit (the channel's end of stream).
        var predecessorWatch: LoopEvent?
        /// Starts the drain once the handover is done.
        var drainStart: LoopEvent?
    }

    /// Seconds the heir has to say hello, and then to serve.
    static let heirHelloSeconds: Int64 = 30
    static let heirReadySeconds: Int64 = 60

    /// Runs a live upgrade on the main thread; blocks until it succeeded or failed.
    public func upgrade(trigger: String) -> UpgradeOutcome {
        let outcome = handOver(trigger: trigger)
        switch outcome {
        case .succeeded(let pid, let allocations):
            logger.notice(
                "live upgrade: pid \(pid) serves now; \(allocations) allocations went over, the rest drain here",
                metadata: [
                    "event": "upgrade_succeeded", "trigger": "\(trigger)", "heir": "\(pid)",
                    "allocations": "\(allocations)",
                ])
        case .failed(let reason):
            logger.error(
                "live upgrade failed: \(reason); this process serves on",
                metadata: ["event": "upgrade_failed", "trigger": "\(trigger)", "reason": "\(reason)"])
        }
        return outcome
    }

    private func handOver(trigger: String) -> UpgradeOutcome {
        if handover.done { return .failed("this process has handed over already and serves only what stayed") }
        if drain.active { return .failed("this process is draining") }
        if let fastPath, fastPath.handover() == nil {
            return .failed(
                "the kernel fast path hangs on a clsact filter here (tcx links need Linux 6.6), which cannot be handed over")
        }
        let channel: HandoverChannel
        let heirEnd: Int32
        do { (channel, heirEnd) = try HandoverChannel.pair() } catch { return .failed(error.description) }
        let pid = spawnHeir(channel: heirEnd)
        close(heirEnd)
        guard pid > 0 else { return .failed("cannot start \(executablePath): \(String(cString: strerror(errno)))") }
        logger.notice(
            "live upgrade: started \(executablePath) as pid \(pid)",
            metadata: ["event": "upgrade_started", "trigger": "\(trigger)", "heir": "\(pid)"])
        func abandon(_ reason: String) -> UpgradeOutcome {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            return .failed(reason)
        }
        let heirVersion: UInt32
        do {
            let hello = HandoverChannel.monotonicMillis() + Self.heirHelloSeconds * 1000
            guard case (.hello(let version, _), _) = try channel.receive(until: hello) else {
                return abandon("the heir did not say hello")
            }
            guard (HandoverMessage.oldestVersion...HandoverMessage.version).contains(version) else {
                return abandon("the heir speaks handover version \(version), this relayd \(HandoverMessage.version)")
            }
            heirVersion = version
            // An older version takes less over (the pause below): what stays drains here.
            logger.notice(
                "live upgrade: pid \(pid) speaks handover version \(version), this relayd \(HandoverMessage.version)",
                metadata: ["event": "upgrade_heir_hello", "heir": "\(pid)", "version": "\(version)"])
            if fastPath != nil && version < 2 {
                return abandon("the heir (handover version \(version)) cannot take the kernel fast path over")
            }
        } catch {
            return abandon("the heir did not start (\(error.description)); its log says why")
        }
        let paused = HandoverReplies()
        // Heirs before version 2 do not read TCP connections, those before version 3 no
        // RFC 6062 state, and those before version 4 no TLS sessions: those then stay and drain here.
        for mailbox in mailboxes {
            mailbox.post(
                .handover(
                    .pause(paused, streams: heirVersion >= 2, tcpRelays: heirVersion >= 3, tlsStreams: heirVersion >= 4)))
        }
        guard var bequests = paused.wait(loops: threadCount, seconds: 10) else {
            resumeLoops()
            return abandon("a loop did not pause in time")
        }
        if !pausePipes(of: &bequests) {
            resumeLoops()
            return abandon("a loop did not pause its RFC 6062 pipes in time")
        }
        let allocations = bequests.reduce(0) { $0 + $1.allocations.count + $1.streamAllocations.count }
        // Once all was sent the heir may serve, and seal TLS records under the keys it was handed.
        var sent = false
        do {
            try send(bequests, on: channel, heirVersion: heirVersion)
            sent = true
            let ready = HandoverChannel.monotonicMillis() + Self.heirReadySeconds * 1000
            switch try channel.receive(until: ready) {
            case (.ready, _): break
            case (.failed(let reason), _):
                resumeLoops(heirMayHaveServed: true)
                return abandon("the heir gave up: \(reason)")
            default:
                resumeLoops(heirMayHaveServed: true)
                return abandon("the heir sent something unexpected")
            }
        } catch {
            resumeLoops(heirMayHaveServed: sent)
            return abandon(error.description)
        }
        commitHandover(channel: channel, heir: pid, trigger: trigger)
        return .succeeded(pid: pid, allocations: allocations)
    }

    /// RFC 6062 pipes run on whichever loop took their data connection: once every loop has
    /// paused, the pipes of the TCP allocations that move pause too, and join the bequests.
    /// False when a loop did not answer in time.
    private func pausePipes(of bequests: inout [LoopBequest]) -> Bool {
        var owners: [PeerConnectionID: PipeOwner] = [:]
        for bequest in bequests {
            for relay in bequest.tcpRelays {
                for connection in relay.connections {
                    guard case .piped = connection.state else { continue }
                    owners[connection.id] = PipeOwner(session: relay.session, peer: connection.peer)
                }
            }
        }
        guard !owners.isEmpty else { return true }
        let paused = HandoverReplies()
        for mailbox in mailboxes { mailbox.post(.handover(.pausePipes(paused, owners))) }
        guard let pipes = paused.wait(loops: threadCount, seconds: 10), pipes.count == bequests.count else { return false }
        for (index, more) in pipes.enumerated() {
            for (socket, fd) in zip(more.sockets, more.descriptors) { bequests[index].add(socket, fd) }
            bequests[index].pipes += more.pipes
        }
        return true
    }

    /// The loops serve on after a failed upgrade. `heirMayHaveServed`: the heir got everything
    /// and may have run its loops, so the TLS sessions handed to it end here instead of going on
    /// (docs/live-upgrade.md, "TLS clients"): a record this process sealed next would reuse a
    /// nonce the heir may have sealed one under.
    private func resumeLoops(heirMayHaveServed: Bool = false) {
        // The heir may have put its program into the links already: this process's goes back.
        do { try fastPath?.updateLinks() } catch {
            logger.error(
                "live upgrade: cannot put the fast path's program back into its links: \(error.description)",
                metadata: ["event": "upgrade_fastpath_reclaim_failed"])
        }
        for mailbox in mailboxes { mailbox.post(.handover(.resume(endingTLSSessions: heirMayHaveServed))) }
    }

    /// The same binary, arguments and environment, with the channel as descriptor 3.
    private func spawnHeir(channel: Int32) -> pid_t {
        var environment = ProcessInfo.processInfo.environment
        environment[HandoverChannel.environmentKey] = "\(HandoverChannel.heirDescriptor)"
        // A newer heir says hello with this version, and reads what this relayd sends.
        environment[HandoverChannel.versionKey] = "\(HandoverMessage.version)"
        // The watchdog belongs to whichever process systemd calls main: the heir, once it serves.
        environment["WATCHDOG_PID"] = nil
        let argv = CommandLine.arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        return relayd_handover_spawn(executablePath, argv, envp, channel)
    }

    /// The sockets (at most `HandoverChannel.maxDescriptors` a message), then the snapshot.
    private func send(_ bequests: [LoopBequest], on channel: HandoverChannel, heirVersion: UInt32)
        throws(HandoverChannel.Failure)
    {
        var sockets: [(HandoverSocket, Int32)] = []
        for bequest in bequests { sockets += zip(bequest.sockets, bequest.descriptors) }
        for (address, fd) in http?.listeningSockets ?? [] {
            sockets.append((HandoverSocket(kind: .httpListener, address: address), fd))
        }
        if let handover = fastPath?.handover() {
            for (index, name) in KernelFastPath.sharedMaps.enumerated() {
                guard let fd = handover.maps[name] else { continue }
                sockets.append((HandoverSocket(kind: .bpfMap, session: UInt64(index), address: HandoverSocket.noAddress), fd))
            }
            for (ifindex, fd) in handover.links {
                sockets.append(
                    (HandoverSocket(kind: .bpfLink, session: UInt64(ifindex), address: HandoverSocket.noAddress), fd))
            }
            for (ifindex, fd) in handover.xdpLinks {
                sockets.append(
                    (HandoverSocket(kind: .bpfXDPLink, session: UInt64(ifindex), address: HandoverSocket.noAddress), fd))
            }
        }
        for piece in sockets.pieces(of: HandoverChannel.maxDescriptors) {
            try channel.send(.sockets(piece.map(\.0)), descriptors: piece.map(\.1))
        }
        var allocations: [UInt64: JournalAllocation] = [:]
        var reservations: [UInt64: JournalReservation] = [:]
        for bequest in bequests {
            for allocation in bequest.allocations + bequest.streamAllocations {
                allocations[allocation.sessionID] = allocation
            }
            reservations.merge(bequest.reservations) { first, _ in first }
        }
        let state = JournalState(
            allocations: allocations,
            keys: journalKeys(), reservations: reservations)
        let snapshot: [UInt8]
        do {
            snapshot = try JournalWriter.compacted(
                state, bootID: Self.handoverBootID, now: EventLoop.now(), streamClients: true)
        } catch {
            throw HandoverChannel.Failure(description: "cannot write the snapshot: \(error)")
        }
        for piece in snapshot.pieces(of: HandoverMessage.maxStatePiece) { try channel.send(.state(Array(piece))) }
        for bequest in bequests {
            for stream in bequest.streams { try channel.send(.stream(stream)) }
        }
        try sendTCPRelays(bequests, on: channel)
        if heirVersion >= 2 {
            // The loops published their counters as they paused: the page is up to date.
            let page = Array(RelaydMetrics.render(metrics.total(), service: http?.router.service ?? ServiceMetrics(),
                carried: metrics.carried).utf8)
            for piece in page.pieces(of: HandoverMessage.maxStatePiece) { try channel.send(.counters(Array(piece))) }
        }
        if heirVersion >= 3 {
            let now = EventLoop.now()
            for limiter in HandoverLimiter.allCases {
                let held = limiter.of(sourceLimits).held(now: now).map { HandoverLimiterEntry(source: $0.source, tokens: $0.tokens) }
                for piece in held.pieces(of: HandoverMessage.limiterEntriesPerMessage) {
                    try channel.send(.limiters(limiter, Array(piece)))
                }
            }
        }
        let blocks = admission.blocklist.list(now: Int64(time(nil)))
        for piece in blocks.pieces(of: HandoverMessage.blocksPerMessage) { try channel.send(.blocks(Array(piece))) }
        try channel.send(
            .done(sockets: UInt32(sockets.count), stateBytes: UInt32(snapshot.count), blocks: UInt32(blocks.count)))
    }

    /// The TCP allocations' RFC 6062 state, with only the pipes that move and their counts as
    /// the pipes paused, then the pipes (in pieces when they hold much).
    private func sendTCPRelays(_ bequests: [LoopBequest], on channel: HandoverChannel) throws(HandoverChannel.Failure) {
        let moved = Set(bequests.flatMap { $0.pipes.map(\.id) })
        for bequest in bequests {
            for var relay in bequest.tcpRelays {
                relay.connections.removeAll { connection in
                    guard case .piped = connection.state else { return false }
                    return !moved.contains(connection.id)
                }
                if let piped = bequest.piped[relay.session]?.current {
                    relay.bytesToPeer = piped.bytesToPeer
                    relay.bytesToClient = piped.bytesToClient
                }
                try channel.send(.tcpRelay(relay))
            }
        }
        for bequest in bequests {
            for pipe in bequest.pipes {
                for piece in pipe.pieces() { try channel.send(.pipe(piece)) }
            }
        }
    }

    /// The boot id both sides check the snapshot with.
    static var handoverBootID: BootID { StateDirectory.currentBootID() ?? BootID(high: 0, low: 0) }

    /// The heir serves: the loops let go of the listeners and UDP allocations, the cluster entry
    /// is the heir's, systemd is told the heir is the main process, and this process drains.
    private func commitHandover(channel: HandoverChannel, heir: pid_t, trigger: String) {
        // The node's entry and quota share in Redis are the heir's now: leave them in place, and
        // go on under a name of this process's own, with a share of what stays here.
        let clusterName = clusterAgent?.name
        stopCluster(leaving: false)
        // state-dir is the heir's now, its blocks file with it; and its unconfirmed block changes
        // are in that file for the heir to send.
        blocks.stopSaving()
        let committed = HandoverReplies()
        for mailbox in mailboxes { mailbox.post(.handover(.commit(committed))) }
        if committed.wait(loops: threadCount, seconds: 10) == nil {
            logger.warning("live upgrade: a loop did not let go in time", metadata: ["event": "upgrade_slow_loop"])
        }
        http?.closeListeningSockets()
        handover.done = true
        if let clusterName, let http, let mainBase {
            startCluster(base: mainBase, http: http, name: Self.handedOverName(clusterName, pid: getpid()))
        }
        handover.channel = channel
        // Until this process exits its allocations' ports are taken; the heir's are reachable.
        ports.setSibling(true)
        notifier.notify("MAINPID=\(heir)")
        notifier = SystemdNotifier(environment: [:])
        // The drain starts on the next turn of the main loop, so an API caller gets its answer
        // even when nothing is left to drain and the process exits at once.
        handover.drainStart = LoopEvent(base: mainBase!, every: timeval(tv_sec: 0, tv_usec: 200_000)) { [unowned self] in
            if !drain.active { startDrain(exitWhenDone: true, signal: trigger) }
        }
    }
}

extension Array {
    /// The array cut into consecutive pieces of at most `size` elements (one handover message each).
    fileprivate func pieces(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
