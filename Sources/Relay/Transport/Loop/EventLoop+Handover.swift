import CLibevent
import Dispatch
import Glibc
import RelayCore
import StunCodec

/// One loop's part in a live upgrade (docs/live-upgrade.md): what it hands the heir.
struct LoopBequest: Sendable {
    var sockets: [HandoverSocket] = []
    /// The descriptors, in the order of `sockets`.
    var descriptors: [Int32] = []
    /// Its UDP clients' allocations, as the state journal keeps them.
    var allocations: [JournalAllocation] = []
    /// The EVEN-PORT reservations it made that no Allocate took yet, by token.
    var reservations: [UInt64: JournalReservation] = [:]
    /// Its plain TCP connections that move, and the allocations they hold.
    var streams: [HandoverStream] = []
    var streamAllocations: [JournalAllocation] = []
    /// The RFC 6062 state of the TCP allocations among those, and its pipes that move.
    var tcpRelays: [TCPRelaySnapshot] = []
    var pipes: [HandoverPipe] = []
    /// Their pipes' counts by session: read once the pipes paused, as the snapshot's.
    var piped: [UInt64: PipedTraffic] = [:]

    mutating func add(_ socket: HandoverSocket, _ fd: Int32) {
        sockets.append(socket)
        descriptors.append(fd)
    }
}

/// The steps of a live upgrade a loop takes, on its own thread, in this order: pause, then
/// resume (the heir failed) or commit (the heir serves).
enum HandoverStep: Sendable {
    /// Stop reading the UDP listeners and the UDP allocations' relay sockets, publish the
    /// counters, and reply with the bequest. With `streams`, plain TCP connections that can move
    /// pause too and go in the bequest; TLS connections OpenSSL serves go on. With
    /// `tcpRelays`, so do TCP allocations (RFC 6062) with their control connections; with
    /// `tlsStreams`, TLS 1.3 connections whose records relayd keeps.
    case pause(HandoverReplies, streams: Bool, tcpRelays: Bool, tlsStreams: Bool)
    /// After every loop paused: pause the pipes of the TCP allocations that move (on whichever
    /// loop those are), and reply with them.
    case pausePipes(HandoverReplies, [PeerConnectionID: PipeOwner])
    /// Read again: the heir did not take over. `endingTLSSessions`: it may have served the TLS
    /// sessions handed to it, which then end here instead (`StreamTransport.resumeAfterHandover`).
    case resume(endingTLSSessions: Bool)
    /// Let go of what the heir serves now: the listeners, the UDP allocations, and the TCP
    /// connections that moved with theirs.
    case commit(HandoverReplies)
}

/// Where the loops answer a step, and where the main thread waits for them.
final class HandoverReplies: Sendable {
    private let bequests = Locked<[Int: LoopBequest]>([:])
    private let arrived = DispatchSemaphore(value: 0)

    func deliver(loop: Int, _ bequest: LoopBequest) {
        bequests.withLock { $0[loop] = bequest }
        arrived.signal()
    }

    /// Every loop's answer in loop order, or nil when one is missing after `seconds`.
    func wait(loops: Int, seconds: Int) -> [LoopBequest]? {
        let deadline = DispatchTime.now() + .seconds(seconds)
        for _ in 0..<loops where arrived.wait(timeout: deadline) == .timedOut { return nil }
        return bequests.withLock { all in (0..<loops).compactMap { all[$0] } }
    }
}

extension EventLoop {
    func handover(_ step: HandoverStep) {
        switch step {
        case .pause(let replies, let streams, let tcpRelays, let tlsStreams):
            replies.deliver(
                loop: wiring.index.value, pauseForHandover(streams: streams, tcpRelays: tcpRelays, tlsStreams: tlsStreams))
        case .pausePipes(let replies, let owners):
            var bequest = LoopBequest()
            let index = UInt16(wiring.index.value)
            for handed in stream.pausePipesForHandover(owners, loop: index) {
                let id = UInt64(handed.pipe.id.value)
                bequest.add(HandoverSocket(kind: .pipeClient, loop: index, session: id, address: handed.pipe.client), handed.clientFD)
                bequest.add(HandoverSocket(kind: .pipePeer, loop: index, session: id, address: HandoverSocket.noAddress), handed.peerFD)
                bequest.pipes.append(handed.pipe)
            }
            replies.deliver(loop: wiring.index.value, bequest)
        case .resume(let endingTLSSessions): resumeAfterHandover(endingTLSSessions: endingTLSSessions)
        case .commit(let replies):
            commitHandover()
            replies.deliver(loop: wiring.index.value, LoopBequest())
        }
    }

    /// Datagrams wait in the kernel's socket buffers from here on, for whichever process reads
    /// next. The journal gets its last records and stops: the heir writes its own.
    private func pauseForHandover(streams handStreams: Bool, tcpRelays: Bool, tlsStreams: Bool) -> LoopBequest {
        let index = UInt16(wiring.index.value)
        let now = EventLoop.now()
        // A Connect whose connect failed at once is answered (447) before its connection pauses.
        tcpRelay.answerFailures()
        flush()
        var bequest = LoopBequest()
        let steeredTo = Dictionary(steered.map { ($0.value, $0.key) }, uniquingKeysWith: { first, _ in first })
        for listener in listeners {
            event_del(listener.event)
            guard steeredAnswer[listener.fd] != nil else {
                bequest.add(HandoverSocket(kind: .udpListener, loop: index, address: listener.address), listener.fd)
                continue
            }
            // A moved mobile client's connected socket goes with its allocation: what it holds,
            // and what comes, reaches the heir's loop that serves the allocation.
            if let fiveTuple = steeredTo[listener.fd], let session = core.allocation(for: fiveTuple)?.sessionID {
                bequest.add(HandoverSocket(kind: .steered, session: session, address: fiveTuple.client), listener.fd)
            }
        }
        for (fd, address) in dtls.pauseListeners() {
            bequest.add(HandoverSocket(kind: .dtlsListener, loop: index, address: address), fd)
        }
        for listener in stream.listeners {
            guard let fd = listener.descriptor else { continue }
            listener.pauseForHandover()
            let kind: HandoverSocket.Kind = listener.transport == .tls ? .tlsListener : .tcpListener
            bequest.add(HandoverSocket(kind: kind, loop: index, address: listener.address), fd)
        }
        var relaySockets = core.udpRelaySockets()
        if handStreams {
            for handed in stream.pauseForHandover(loop: index, tcpRelays: tcpRelays, tls: tlsStreams) {
                bequest.add(
                    HandoverSocket(kind: .tcpClient, loop: index, session: handed.stream.id, address: handed.stream.client),
                    handed.fd)
                bequest.streams.append(handed.stream)
                if let allocation = handed.allocation { bequest.streamAllocations.append(allocation) }
                relaySockets += handed.relaySockets
                if let tcpRelay = handed.tcpRelay {
                    bequest.tcpRelays.append(tcpRelay)
                    bequest.piped[tcpRelay.session] = handed.piped
                }
                for peer in handed.peers {
                    bequest.add(
                        HandoverSocket(
                            kind: .peerConnection, loop: index, session: UInt64(peer.id.value),
                            address: HandoverSocket.noAddress), peer.fd)
                }
            }
        }
        for relay in relaySockets {
            if let event = relayEvents[relay.socket.descriptor] { event_del(event) }
            let kind: HandoverSocket.Kind = relay.additional ? .relayAdditional : .relayMain
            bequest.add(
                HandoverSocket(kind: kind, session: relay.session, address: relay.address), relay.socket.descriptor)
        }
        core.forgetWaitingUDPRequests()
        journal?.write(core, now: now)
        core.journaling = false
        // The heir goes on from these counters (docs/live-upgrade.md, "Metrics").
        publishMetrics()
        bequest.allocations = Array(core.journalAllocations().values)
        bequest.reservations = core.liveReservations()
        handingOver = true
        return bequest
    }

    private func resumeAfterHandover(endingTLSSessions: Bool) {
        guard handingOver else { return }
        handingOver = false
        for listener in listeners { event_add(listener.event, nil) }
        dtls.resumeListeners()
        for listener in stream.listeners { listener.resume() }
        for event in relayEvents.values { event_add(event, nil) }
        tcpRelay.resumeAfterHandover()
        stream.resumeAfterHandover(endingTLSSessions: endingTLSSessions)
        if let journal {
            core.journaling = true
            journal.compact(core, now: EventLoop.now())
        }
    }

    /// The heir reads the listeners and the relay sockets now; this process closes its copies
    /// (the sockets live on in the heir) and serves its stream clients until they leave.
    private func commitHandover() {
        guard handingOver else { return }
        dtls.forgetSharedListeners(dtlsShared)
        dtlsShared.removeAll()
        for listener in listeners {
            event_free(listener.event)
            close(listener.fd)
        }
        listeners.removeAll()
        steered.removeAll()
        steeredAnswer.removeAll()
        dtls.closeListeners()
        stream.closeListeners()
        // The TCP allocations' peer connections leave the node's table before the allocations
        // end here, so their ending closes no pipe.
        tcpRelay.letGoHandedOver()
        stream.commitHandover(now: EventLoop.now())
        // The heir's routes are in the same maps: the allocations that end here remove none.
        fastPath?.letGo()
        core.releaseHandedOver(now: EventLoop.now())
        flush()
        journal?.detach()
        journal = nil
        // What stayed is served, and swept, as before.
        handingOver = false
    }
}
