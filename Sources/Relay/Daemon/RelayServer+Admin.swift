import Foundation
import RelayCore

extension RelayServer: AdminControl {
    /// How long the main thread waits for every loop thread's answer. A loop answers between two
    /// batches of packets, within milliseconds even under load; past this the API answers 503.
    static let adminTimeout = 2.0

    public func allocations(_ selector: AllocationSelector, tenant: String?, after: String?, limit: Int)
        -> AllocationPageResult?
    {
        guard let answers = askLoops(.list(selector, tenant: tenant, after: after, limit: limit)) else { return nil }
        var records: [AllocationRecord] = []
        var total = 0
        var remaining = 0
        for case .records(let some, let matching, let after) in answers {
            records += some
            total += matching
            remaining += after
        }
        records.sort { $0.session < $1.session }
        return AllocationPageResult(records: Array(records.prefix(limit)), total: total, more: remaining > limit)
    }

    public func terminate(_ selector: AllocationSelector, tenant: String?) -> Int? {
        guard let answers = askLoops(.terminate(selector, tenant: tenant)) else { return nil }
        var total = 0
        for case .terminated(let count) in answers { total += count }
        return total
    }

    public func setBlock(_ entry: UserBlocklist.Entry) -> Bool {
        blocks.set(entry, now: Int64(time(nil)))
    }

    public func liftBlock(_ user: String, by: String) -> Bool {
        blocks.lift(user, by: by, now: Int64(time(nil)))
    }

    public func userTraffic() -> [UserTraffic]? {
        guard let answers = askLoops(.userTraffic) else { return nil }
        var parts: [UserTraffic] = []
        for case .users(let some) in answers { parts += some.values }
        return Array(UserTraffic.byUser(parts).values)
    }

    /// Posts `operation` to every loop thread and waits for all the answers (on the main
    /// thread, which no loop ever waits for); nil after `adminTimeout`.
    func askLoops(_ operation: AdminOperation) -> [AdminAnswer]? {
        let answers = SharedState<[AdminAnswer]>([])
        let arrived = DispatchSemaphore(value: 0)
        for mailbox in mailboxes {
            mailbox.post(
                .admin(
                    AdminTask(operation: operation) { answer in
                        answers.withLock { $0.append(answer) }
                        arrived.signal()
                    }))
        }
        let deadline = DispatchTime.now() + Self.adminTimeout
        for _ in mailboxes where arrived.wait(timeout: deadline) == .timedOut { return nil }
        return answers.withLock { $0 }
    }
}
