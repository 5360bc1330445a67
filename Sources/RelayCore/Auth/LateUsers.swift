import StunCodec

/// Users a user database holds that the in-memory view did not have yet (docs/userdb.md, "A
/// user the view does not have yet"): an Allocate naming one is held, the user is looked up off
/// the loop (`CoreCommand.lookUpUser`), and the Allocate is handled again when the answer comes
/// (`RelayCore.userLookedUp`). Answers are kept a while, found or not, so a client retrying, or
/// a flood of unknown names, does not ask the database again for each request.
struct LateUsers {
    struct Key: Hashable {
        var name: String
        var realm: String
    }

    struct Held {
        var key: Key
        var bytes: [UInt8]
        var origin: ClientOrigin
        var since: Int64
    }

    /// Found users' MD5 keys (RFC 8489 §9.2.2) and names found missing, with when they lapse.
    private var answers: [Key: (key: [UInt8]?, until: Int64)] = [:]
    /// Requests waiting for an answer, by lookup serial.
    private(set) var held: [UInt64: Held] = [:]
    /// Lookups asked and not answered, by user.
    private var asked: [Key: UInt64] = [:]
    private var serial: UInt64 = 0

    /// Seconds a found user's key, and a missing user's absence, are kept.
    static let foundSeconds: Int64 = 5
    static let missingSeconds: Int64 = 10
    /// Seconds after which a lookup that never came back is forgotten.
    static let giveUp: Int64 = 10
    /// Requests one loop holds at most; past it a request is answered as the view alone allows.
    static let limit = 1024
    /// Answers kept at most.
    static let answerLimit = 65_536

    /// The key found for `key`, `.some(nil)` when it is known missing, nil when not asked yet.
    func answer(_ key: Key, now: Int64) -> [UInt8]?? {
        guard let entry = answers[key], entry.until > now else { return nil }
        return .some(entry.key)
    }

    /// Holds a request for `key`: the serial to look it up under, or nil when one is being
    /// looked up already (the request waits with it), or when too many wait.
    mutating func hold(_ request: Held) -> (serial: UInt64, ask: Bool)? {
        guard held.count < Self.limit else { return nil }
        serial &+= 1
        held[serial] = request
        if asked[request.key] != nil { return (serial, false) }
        asked[request.key] = serial
        return (serial, true)
    }

    /// Takes the answer for `key` and returns the requests that waited for it.
    mutating func answered(_ key: Key, md5: [UInt8]?, now: Int64) -> [Held] {
        if answers.count >= Self.answerLimit { answers = answers.filter { $0.value.until > now } }
        if answers.count < Self.answerLimit {
            answers[key] = (md5, now + (md5 == nil ? Self.missingSeconds : Self.foundSeconds))
        }
        asked[key] = nil
        let waiting = held.filter { $0.value.key == key }
        for serial in waiting.keys { held[serial] = nil }
        return waiting.sorted { $0.key < $1.key }.map(\.value)
    }

    /// Forgets lookups older than `giveUp` (their requests were retransmitted or abandoned).
    mutating func sweep(now: Int64) {
        let stale = held.filter { now - $0.value.since >= Self.giveUp }
        for (serial, entry) in stale {
            held[serial] = nil
            if asked[entry.key] == serial { asked[entry.key] = nil }
        }
        answers = answers.filter { $0.value.until > now }
    }
}

/// A user to look up in the user database, for the Allocate(s) held under `key`.
public struct UserLookup: Sendable, Hashable {
    public let name: String
    public let realm: String
    public let loop: LoopIndex
}
