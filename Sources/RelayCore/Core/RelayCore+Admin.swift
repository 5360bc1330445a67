import StunCodec

/// What the admin API asks of a loop thread (docs/admin.md): list its allocations, end some now.
extension RelayCore {
    /// This thread's allocations that `selector` names, as of monotonic `now`.
    public func allocationRecords(_ selector: AllocationSelector, tenant: String? = nil, now: Int64) -> [AllocationRecord] {
        allocationPage(selector, tenant: tenant, after: nil, limit: Int.max, now: now).records
    }

    /// One page of this thread's allocations that `selector` names: at most `limit`, in session
    /// order, after session `after`; with how many match in all and after `after`. Only the page's
    /// allocations are copied, so paging through a large server costs each loop a scan, not a copy.
    /// `tenant`: only that tenant's allocations (a tenant's admin key, docs/tenants.md; "" is the
    /// default tenant); nil: every tenant's. Users are quota users (`Tenant.quotaUser`).
    public func allocationPage(
        _ selector: AllocationSelector, tenant: String? = nil, after: String?, limit: Int, now: Int64
    ) -> (records: [AllocationRecord], matching: Int, remaining: Int) {
        var matching = 0
        var candidates: [Allocation] = []
        for allocation in table.all {
            guard within(tenant, allocation),
                selector.matches(session: allocation.session, user: Substring(allocation.lease.user))
            else { continue }
            matching += 1
            if let after, allocation.session <= after { continue }
            candidates.append(allocation)
        }
        let remaining = candidates.count
        let page = candidates.sorted { $0.session < $1.session }.prefix(limit)
        return (page.map { record(of: $0, now: now) }, matching, remaining)
    }

    private func within(_ tenant: String?, _ allocation: Allocation) -> Bool {
        guard let tenant else { return true }
        return allocation.lease.tenant == tenant
    }

    private func record(of allocation: Allocation, now: Int64) -> AllocationRecord {
        var relayed = [allocation.advertisedAddress]
        var remaining = allocation.expiry - now
        if let additional = allocation.additional {
            relayed.append(additional.advertisedAddress)
            remaining = max(remaining, additional.expiry - now)
        }
        return AllocationRecord(
            session: allocation.session, user: allocation.lease.user, tenant: allocation.lease.tenant,
            fiveTuple: allocation.origin.fiveTuple,
            relayed: relayed, ageSeconds: now - allocation.created, remainingSeconds: max(0, remaining),
            permissions: allocation.permissions.filter { $0.expiry > now }.map { ($0.peer, $0.expiry - now) },
            channels: allocation.channels.filter { $0.expiry > now }.map { ($0.number, $0.peer, $0.expiry - now) },
            traffic: allocation.relayedTraffic, mobile: allocation.mobile, thread: context.threadIndex)
    }

    /// Ends now every allocation of this thread that `selector` names, as if it had expired
    /// (relay sockets closed, quota released, routes withdrawn, `allocation_deleted` logged with
    /// reason `terminated`). The client's next Refresh gets 437 (RFC 8656 §8). Returns how many.
    public func terminateAllocations(_ selector: AllocationSelector, tenant: String? = nil, now: Int64) -> Int {
        assertOwned()
        let chosen = table.all.filter {
            within(tenant, $0) && selector.matches(session: $0.session, user: Substring($0.lease.user))
        }
        for allocation in chosen { delete(allocation, reason: .terminated, now: now) }
        return chosen.count
    }

    /// This thread's live allocations summed by user.
    public func userTraffic() -> [String: UserTraffic] {
        assertOwned()
        return UserTraffic.byUser(
            table.all.lazy.map {
                UserTraffic(user: $0.lease.user, allocations: 1, traffic: $0.relayedTraffic)
            })
    }
}
