import CLibevent
import Glibc

/// Where a drain stands (main thread only).
struct DrainState {
    /// New allocations are refused and `/readyz` is unready.
    var active = false
    /// The process exits when the drain ends (SIGTERM, SIGINT); SIGUSR1 drains without exiting.
    var exitWhenDone = false
    /// Unix time the drain gives up waiting for allocations to end.
    var deadline: Int64 = 0
    /// The "drain complete" line was logged (SIGUSR1 drains stay in place after it).
    var completed = false
    var timer: LoopEvent?
}

extension RelayServer {
    /// SIGTERM or SIGINT: drain, then exit 0 once every allocation has ended or `drain-timeout`
    /// has passed; a second one while draining to exit exits at once.
    func stopSignal(_ name: String) {
        if drain.exitWhenDone {
            logger.notice("\(name) again: exiting now", metadata: ["event": "shutdown_forced"])
            exitMainLoop()
            return
        }
        startDrain(exitWhenDone: true, signal: name)
    }

    /// Refuses new allocations (508, or 300 with ALTERNATE-SERVER when `alternate-server` is set),
    /// turns `/readyz` unready and keeps relaying for the allocations already there.
    func startDrain(exitWhenDone: Bool, signal: String) {
        if exitWhenDone {
            drain.exitWhenDone = true
            notifier.notifyStopping(status: "draining \(activeAllocations()) allocations")
        }
        if !drain.active {
            drain.active = true
            drain.deadline = EventLoop.now() + Int64(configuration.drainTimeout)
            health.setDraining(true)
            postContexts()
            drain.timer = LoopEvent(base: mainBase!, every: timeval(tv_sec: 0, tv_usec: 250_000)) { [unowned self] in
                checkDrain()
            }
        }
        // With allocations left the drain may last up to drain-timeout (an hour by default):
        // say how to stop at once, for whoever pressed Ctrl-C in a terminal.
        let howToStop = drain.exitWhenDone ? "; a second Ctrl-C (SIGINT) or SIGTERM stops at once" : ""
        logger.notice(
            "draining: new allocations refused, existing ones relayed until they end\(howToStop)",
            metadata: [
                "event": "drain_started", "signal": "\(signal)", "allocations": "\(activeAllocations())",
                "timeout_s": "\(max(0, drain.deadline - EventLoop.now()))",
                "exit_when_done": "\(drain.exitWhenDone)",
            ])
        checkDrain()
    }

    /// Ends the drain when no allocation is left or the timeout has passed. After a live upgrade
    /// the old process also waits for its stream connections: an RFC 6062 pipe that could not
    /// move relays on here after its allocation went to the heir (docs/live-upgrade.md).
    func checkDrain() {
        let remaining = activeAllocations()
        let connections = handover.done ? streams.limiter.total : 0
        let timedOut = EventLoop.now() >= drain.deadline
        guard (remaining == 0 && connections == 0) || timedOut else { return }
        if drain.exitWhenDone {
            logger.notice(
                timedOut && remaining > 0 ? "drain timeout: ending remaining allocations" : "drain complete: exiting",
                metadata: ["event": "drain_done", "allocations": "\(remaining)"])
            drain.timer = nil
            exitMainLoop()
        } else if !drain.completed && remaining == 0 {
            drain.completed = true
            logger.notice("drain complete: no allocations left", metadata: ["event": "drain_done", "allocations": "0"])
        } else if !drain.completed && timedOut {
            drain.completed = true
            logger.notice(
                "drain timeout passed; still refusing new allocations",
                metadata: ["event": "drain_timeout", "allocations": "\(remaining)"])
        }
    }

    /// Live allocations over all loops, counted exactly by the quota tracker (taken before an
    /// allocation is created, released when it is deleted).
    func activeAllocations() -> Int { admission.total }

    func exitMainLoop() {
        if let mainBase { event_base_loopexit(mainBase, nil) }
    }
}
