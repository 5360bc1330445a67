import RelayCore
import CLibevent
import Glibc

// A pipe's bytes against its allocation's `max-bps` budget and piped-traffic count (RFC 6062
// §5.5, docs/tcp-relay.md). A byte stream cannot lose a byte, so where a datagram over the budget
// is dropped, a pipe stops reading the sending side instead: towards the client it reads at most
// what the budget grants; towards the peer it keeps what the budget did not grant and writes it
// once it does. A side held back waits for a libevent timer at the start of the budget's next
// second, never a busy loop. The owning loop's thread only.
extension StreamConnection {
    /// What the budget grants of `bytes` now: all of them without `max-bps`.
    @inline(__always)
    func grant(_ direction: BandwidthBudget.Direction, upTo bytes: Int, _ pipe: TCPPipe) -> Int {
        guard let budget = pipe.account.budget else { return bytes }
        return budget.grant(direction, upTo: bytes, now: EventLoop.now())
    }

    /// Gives back a grant a read did not use.
    func refund(_ direction: BandwidthBudget.Direction, _ bytes: Int, _ pipe: TCPPipe) {
        guard bytes > 0, let budget = pipe.account.budget else { return }
        budget.refund(direction, bytes: bytes, now: EventLoop.now())
    }

    /// Counts `bytes` about to be passed on in the allocation's piped traffic and the loop's
    /// metrics; false, with the connection closed, when the allocation ended (its summary is
    /// final: these bytes are not passed on).
    @inline(__always)
    func charge(_ direction: BandwidthBudget.Direction, _ bytes: Int, _ pipe: TCPPipe) -> Bool {
        guard bytes > 0 else { return true }
        guard pipe.account.traffic.add(direction, bytes: bytes) else {
            close(.relayEnded)
            return false
        }
        if pipe.apiName != nil { return true }
        switch direction {
        case .toPeer: owner.loop.core.counters.tcpBytesToPeer &+= UInt64(bytes)
        case .toClient: owner.loop.core.counters.tcpBytesToClient &+= UInt64(bytes)
        }
        return true
    }

    /// The budget towards the client is spent for this second: the peer is not read until the next.
    func peerWaitsForBudget(_ pipe: TCPPipe) {
        pipe.peerWaitsForBudget = true
        event_del(pipe.readEvent)
        armBudgetTimer(pipe)
    }

    /// Wakes the pipe just after the budget's current second ends (the budget counts whole
    /// seconds of `EventLoop.now()`'s clock, docs/clocks.md).
    func armBudgetTimer(_ pipe: TCPPipe) {
        guard let timer = pipe.budgetTimer else { return }
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        let microseconds = (1_000_000_000 - Int(ts.tv_nsec)) / 1000 + 1000
        var delay = timeval(tv_sec: microseconds / 1_000_000, tv_usec: microseconds % 1_000_000)
        event_add(timer, &delay)
    }

    /// A new second of the budget: the client bytes kept unpaid are granted (and written) as far
    /// as it allows, and each side held back is read again once nothing holds it any more.
    func budgetRefilled() {
        guard let pipe, state == .open else { return }
        if pipe.unpaid > 0 {
            let granted = grant(.toPeer, upTo: pipe.unpaid, pipe)
            guard charge(.toPeer, granted, pipe) else { return }
            pipe.unpaid -= granted
            if granted > 0 { event_add(pipe.writeEvent, nil) }
        }
        if pipe.unpaid > 0 {
            armBudgetTimer(pipe)
        } else if pipe.clientWaitsForBudget {
            pipe.clientWaitsForBudget = false
            resumeClientIfReady(pipe)
        }
        if pipe.peerWaitsForBudget {
            pipe.peerWaitsForBudget = false
            if !pipe.peerPaused { event_add(pipe.readEvent, nil) }
        }
    }
}
