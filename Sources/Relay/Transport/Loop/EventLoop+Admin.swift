import RelayCore

extension EventLoop {
    /// Answers one admin request (docs/admin.md) on this loop thread: a list carries what the
    /// kernel relayed up to now; allocations ended are flushed (sockets closed, routes withdrawn,
    /// `allocation_deleted` logged) before the answer leaves.
    func serve(_ task: AdminTask) {
        let now = EventLoop.now()
        switch task.operation {
        case .list(let selector, let tenant, let after, let limit):
            collectFastPathTraffic()
            let page = core.allocationPage(selector, tenant: tenant, after: after, limit: limit, now: now)
            task.reply(.records(page.records, matching: page.matching, remaining: page.remaining))
        case .userTraffic:
            collectFastPathTraffic()
            task.reply(.users(core.userTraffic()))
        case .terminate(let selector, let tenant):
            if slotsInUse > 0 { flush() }
            let count = core.terminateAllocations(selector, tenant: tenant, now: now)
            flush()
            task.reply(.terminated(count))
        }
    }
}
