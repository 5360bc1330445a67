/// Outcome of one setup step over many clients: successes, failures by error code, duration.
struct SetupTally {
    var succeeded = 0
    /// Failures keyed by STUN error code; 0 = no answer after all retransmissions,
    /// 1 = an answer that could not be parsed or lacked a required attribute.
    var failures: [Int: Int] = [:]
    /// From the first request sent to the last transaction finished, in ns.
    var elapsedNs: UInt64 = 0
    /// Retransmissions sent.
    var retransmits = 0
    /// Clients that got 437 on Allocate and retried from a new local port.
    var reopened = 0

    var failed: Int { failures.values.reduce(0, +) }

    mutating func fail(_ code: Int) { failures[code, default: 0] += 1 }

    mutating func merge(_ other: SetupTally) {
        succeeded += other.succeeded
        retransmits += other.retransmits
        reopened += other.reopened
        elapsedNs += other.elapsedNs
        for (code, n) in other.failures { failures[code, default: 0] += n }
    }

    /// Completed transactions per second.
    var ratePerSecond: Double { elapsedNs == 0 ? 0 : Double(succeeded) / (Double(elapsedNs) / 1e9) }

    /// `{"401": 3, "timeout": 1}` style JSON object of the failures.
    var failuresJSON: String {
        let parts = failures.keys.sorted().map { code -> String in
            let name = code == 0 ? "timeout" : code == 1 ? "bad-response" : String(code)
            return "\"\(name)\":\(failures[code]!)"
        }
        return "{" + parts.joined(separator: ",") + "}"
    }
}
