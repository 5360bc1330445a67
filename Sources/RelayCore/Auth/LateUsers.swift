import StunCodec

/// Users a user database holds that the in-memory view did not have yet (docs/userdb.md, "A
/// user the view does not have yet"): an Allocate naming one is held, the user is looked up off
/// the loop (`CoreCommand.lookUpUser`), and the Allocate is handled again when the answer comes
/// (`RelayCore.userLookedUp`). Answers are kept a while, found or not, so a client retrying, or
/// a flood of unknown names, does not ask the database again for each request. Everything here
/// is bounded: held requests, answers, and the work one answer costs.
struct LateUsers {
    struct Key: Hashable {
        var name: String
        var realm: String
    }

    struct Held {
        var key: Key
        var bytes: [UInt8]
        var origin: ClientOrigin
        var transactionID: TransactionID
        var since: Int64
    }

    /// What a lookup found.
    enum Answer: Equatable {
        case found([UInt8])
        case missing
    }

    /// Found users' MD5 keys (RFC 8489 §9.2.2) and names found missing, with when they lapse.
    private var answers: [Key: (answer: Answer, until: Int64)] = [:]
    /// Requests waiting for an answer, by lookup serial.
    private(set) var held: [UInt64: Held] = [:]
    /// Lookups asked and not answered, by user.
    private var asked: [Key: UInt64] = [:]
    private var serial: UInt64 = 0

    /// Seconds a found user's key, a missing user's absence, and a failed lookup are kept.
    static let foundSeconds: Int64 = 5
    static let missingSeconds: Int64 = 10
    static let failedSeconds: Int64 = 2
    /// Seconds after which a lookup that never came back is forgotten.
    static let giveUp: Int64 = 10
    /// Requests one loop holds at most; past it a request is answered as the view alone allows.
    static let limit = 1024
    /// Answers kept at most; past it the oldest to lapse goes first.
    static let answerLimit = 16_384

    /// What a lookup found for `key`, nil when there is no answer (yet, or any more).
    func answer(_ key: Key, now: Int64) -> Answer? {
        guard let entry = answers[key], entry.until > now else { return nil }
        return entry.answer
    }

    /// Whether a copy of this request (same 5-tuple and transaction) already waits.
    func holds(_ fiveTuple: FiveTuple, transactionID: TransactionID) -> Bool {
        held.values.contains { $0.origin.fiveTuple == fiveTuple && $0.transactionID == transactionID }
    }

    /// Whether any request of `fiveTuple` waits (a stream connection that must not move).
    func holds(_ fiveTuple: FiveTuple) -> Bool { held.values.contains { $0.origin.fiveTuple == fiveTuple } }

    /// Holds a request for `key`: the serial to look it up under, and whether to ask (false
    /// when a lookup of that user runs already); nil when too many wait.
    mutating func hold(_ request: Held) -> (serial: UInt64, ask: Bool)? {
        guard held.count < Self.limit else { return nil }
        serial &+= 1
        held[serial] = request
        if asked[request.key] != nil { return (serial, false) }
        asked[request.key] = serial
        return (serial, true)
    }

    /// Takes the answer for `key` (nil: the database could not be asked) and returns the
    /// requests that waited for it, in the order they came.
    mutating func answered(_ key: Key, md5: [UInt8]?, failed: Bool, now: Int64) -> [Held] {
        let answer: Answer = md5.map { .found($0) } ?? .missing
        let lifetime = md5 != nil ? Self.foundSeconds : failed ? Self.failedSeconds : Self.missingSeconds
        if answers[key] == nil, answers.count >= Self.answerLimit,
            let oldest = answers.min(by: { $0.value.until < $1.value.until })?.key
        {
            answers[oldest] = nil
        }
        answers[key] = (answer, now + lifetime)
        asked[key] = nil
        let waiting = held.filter { $0.value.key == key }
        for serial in waiting.keys { held[serial] = nil }
        return waiting.sorted { $0.key < $1.key }.map(\.value)
    }

    /// Forgets the requests of a closed connection: nothing is allocated for it later.
    mutating func forget(_ fiveTuple: FiveTuple) {
        held = held.filter { $0.value.origin.fiveTuple != fiveTuple }
    }

    /// Forgets the requests of every 5-tuple `matching` picks.
    mutating func forget(where matching: (FiveTuple) -> Bool) {
        held = held.filter { !matching($0.value.origin.fiveTuple) }
    }

    /// Forgets lookups older than `giveUp` (their requests were retransmitted or abandoned),
    /// and answers that lapsed.
    mutating func sweep(now: Int64) {
        let stale = held.filter { now - $0.value.since >= Self.giveUp }
        for (serial, entry) in stale {
            held[serial] = nil
            if asked[entry.key] == serial { asked[entry.key] = nil }
        }
        answers = answers.filter { $0.value.until > now }
    }
}

/// A user to look up in the user database, for the Allocate(s) held under its name and realm.
public struct UserLookup: Sendable, Hashable {
    public let name: String
    public let realm: String
    public let loop: LoopIndex
}
