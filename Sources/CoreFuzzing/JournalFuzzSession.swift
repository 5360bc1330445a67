import RelayCore
import StunCodec

// Used by journal-fuzz (FuzzJournal/) and by the corpus replay in JournalFuzzRegressionTests.
/// One journal-fuzz input read as a restarting relayd reads its journal (docs/state-journal.md),
/// and what must hold of any answer, whatever the bytes:
///
/// - a framed input's header is good and its frames whole: no header error, no damaged tail;
/// - the good bytes end within the journal, at its end exactly when nothing was damaged, and
///   reading just them gives the same state;
/// - every allocation recovered is UDP and live at `now` within the bounds: relayed addresses,
///   permissions (no more than allowed) and channels (numbers 0x4000–0x4FFF), and adopts with
///   positive seconds left; every reservation is live within its bound;
/// - what was recovered compacts without error, and reads back at `now` unchanged with nothing
///   dropped.
public struct JournalFuzzSession {
    public init() {}

    /// The reader's answer to `input`, for the regression tests.
    public func recover(_ input: UnsafeRawBufferPointer) -> Result<JournalRecovery, JournalHeaderError> {
        let decoded = JournalFuzzInput(input)
        return Result { () throws(JournalHeaderError) in try read(decoded.journal, now: decoded.now) }
    }

    /// What went wrong with `input`, nothing when every invariant held.
    public func run(_ input: UnsafeRawBufferPointer) -> [String] {
        let decoded = JournalFuzzInput(input)
        let recovery: JournalRecovery
        do throws(JournalHeaderError) {
            recovery = try read(decoded.journal, now: decoded.now)
        } catch {
            return decoded.framed ? ["a framed journal's header refused: \(error)"] : []
        }
        var failures: [String] = []
        func check(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { failures.append(message()) }
        }
        let count = decoded.journal.count
        let tail = String(describing: recovery.tail)
        check(!decoded.framed || recovery.tail == nil, "a framed journal has a damaged tail: \(tail)")
        check(
            recovery.validBytes >= JournalFormat.headerBytes && recovery.validBytes <= count,
            "good bytes end at \(recovery.validBytes) of \(count)")
        check(
            (recovery.tail == nil) == (recovery.validBytes == count),
            "tail \(tail) but good bytes end at \(recovery.validBytes) of \(count)")
        if let prefix = try? read(Array(decoded.journal.prefix(recovery.validBytes)), now: decoded.now) {
            check(prefix.state == recovery.state && prefix.tail == nil, "the good bytes alone recover another state")
        } else {
            failures.append("the good bytes alone are refused")
        }
        failures += Self.stateFailures(recovery.state, now: decoded.now)
        failures += Self.compactionFailures(recovery.state, now: decoded.now)
        return failures
    }

    private func read(_ journal: [UInt8], now: Int64) throws(JournalHeaderError) -> JournalRecovery {
        try JournalReader.read(journal, bootID: JournalFuzzInput.bootID, now: now, bounds: JournalFuzzInput.bounds)
    }

    /// Everything recovered is live at `now` and within the bounds.
    static func stateFailures(_ state: JournalState, now: Int64) -> [String] {
        let bounds = JournalFuzzInput.bounds
        var failures: [String] = []
        func within(_ expiresAt: Int64, _ bound: Int64) -> Bool { expiresAt > now && expiresAt - now <= bound }
        for (id, allocation) in state.allocations {
            let relays = [allocation.main] + (allocation.additional.map { [$0] } ?? [])
            if id != allocation.sessionID { failures.append("allocation \(id) holds session \(allocation.sessionID)") }
            if allocation.fiveTuple.transport != .udp { failures.append("allocation \(id) is not UDP") }
            if !relays.allSatisfy({ within($0.expiresAt, bounds.allocationLifetime) }) {
                failures.append("allocation \(id): a relayed address expired or beyond its bound")
            }
            if allocation.permissions.count > bounds.permissionsPerAllocation
                || !allocation.permissions.allSatisfy({ within($0.expiresAt, bounds.permissionLifetime) })
            {
                failures.append("allocation \(id): permissions past their limits")
            }
            if !allocation.channels.allSatisfy({
                within($0.expiresAt, bounds.channelLifetime) && JournalFormat.channelNumbers.contains($0.number)
            }) {
                failures.append("allocation \(id): channels past their limits")
            }
            let adopted = allocation.adopted(
                listener: ClientSocket(descriptor: 3), main: RelaySocket(descriptor: 4),
                additional: RelaySocket(descriptor: 5), now: now)
            let left =
                [adopted.main.secondsLeft] + (adopted.additional.map { [$0.secondsLeft] } ?? [])
                + adopted.permissions.map(\.secondsLeft) + adopted.channels.map(\.secondsLeft)
            if !left.allSatisfy({ $0 > 0 }) { failures.append("allocation \(id) adopts with no time left") }
        }
        for (token, reservation) in state.reservations where !within(reservation.expiresAt, bounds.reservationLifetime)
        {
            failures.append("reservation \(token) expired or beyond its bound")
        }
        return failures
    }

    /// The recovered state compacts, and reads back unchanged with nothing dropped.
    static func compactionFailures(_ state: JournalState, now: Int64) -> [String] {
        let journal: [UInt8]
        do throws(JournalEncodingError) {
            journal = try JournalWriter.compacted(state, bootID: JournalFuzzInput.bootID, now: now)
        } catch {
            return ["the recovered state does not compact: \(error)"]
        }
        do throws(JournalHeaderError) {
            let again = try JournalReader.read(
                journal, bootID: JournalFuzzInput.bootID, now: now, bounds: JournalFuzzInput.bounds)
            var failures: [String] = []
            if again.state != state { failures.append("the compacted state reads back otherwise") }
            if !again.drops.isEmpty || again.tail != nil || again.validBytes != journal.count {
                failures.append(
                    "the compacted journal reads back with drops \(again.drops), tail \(String(describing: again.tail))"
                )
            }
            return failures
        } catch {
            return ["the compacted journal's header is refused: \(error)"]
        }
    }
}
