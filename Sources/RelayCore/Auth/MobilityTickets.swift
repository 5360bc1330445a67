import StunCodec

/// Mobility tickets (RFC 8016 §3.3) and the loop thread that holds each mobile allocation, shared
/// by every loop thread (docs/mobility.md).
///
/// A ticket is `key id (1) || SealedBox(session id (8) || serial (4))`: AES-256-GCM under a key
/// only this process knows, so no one else can read, alter or forge one. The serial counts the
/// allocation's moves; only a ticket with the current serial moves it, so a ticket seen on the
/// wire cannot move it again, and any ticket still needs the allocation owner's credentials
/// (RFC 8016 §3.2.2: 441). The key rotates on SIGHUP (`rotate`); tickets sealed under the key
/// before it still open, older ones do not.
public final class MobilityTickets: Sendable {
    struct Key: Sendable {
        var id: UInt8
        var bytes: [UInt8]
    }

    struct Keys: Sendable {
        var current: Key
        var previous: Key?
    }

    private let keys: Locked<Keys>
    private let owners = Locked<[UInt64: Int]>([:])
    /// Bytes of a ticket: the key id, then the sealed session id and serial.
    public static let length = 1 + SealedBox.overhead + 12

    /// Keys from `key` (32 bytes), or a random one.
    public init(key: [UInt8]? = nil) {
        keys = Locked(Keys(current: Key(id: 1, bytes: key ?? MobilityTickets.randomKey()), previous: nil))
    }

    /// A fresh random key (the system's generator, getrandom on Linux).
    public static func randomKey() -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<SealedBox.keyLength).map { _ in g.next() }
    }

    /// Seals new tickets under `key` from now on; tickets under the current key still open.
    public func rotate(to key: [UInt8] = MobilityTickets.randomKey()) {
        keys.withLock { k in
            k.previous = k.current
            k.current = Key(id: k.current.id &+ 1, bytes: key)
        }
    }

    /// Names of the keys in a live upgrade's snapshot (docs/live-upgrade.md).
    public static let currentKeyName = "mobility-ticket-key"
    public static let previousKeyName = "mobility-ticket-previous-key"

    /// The keys, current and previous, as a live upgrade hands them on (each as its id, then
    /// the key): a ticket sealed before the upgrade still opens after it.
    public func exportedKeys() -> [JournalKey] {
        keys.withLock { k in
            var out = [JournalKey(name: Self.currentKeyName, bytes: [k.current.id] + k.current.bytes)]
            if let previous = k.previous {
                out.append(JournalKey(name: Self.previousKeyName, bytes: [previous.id] + previous.bytes))
            }
            return out
        }
    }

    /// Takes over keys `exportedKeys` gave; without a current key of the right length nothing
    /// changes, and a previous key of the wrong length is left out.
    public func adopt(_ exported: [JournalKey]) {
        func key(_ name: String) -> Key? {
            guard let found = exported.first(where: { $0.name == name }), found.bytes.count == 1 + SealedBox.keyLength
            else { return nil }
            return Key(id: found.bytes[0], bytes: Array(found.bytes.dropFirst()))
        }
        guard let current = key(Self.currentKeyName) else { return }
        let previous = key(Self.previousKeyName)
        keys.withLock { $0 = Keys(current: current, previous: previous) }
    }

    /// The ticket for `session` after `serial` moves. `nonce` must never repeat under one key:
    /// the caller gives its thread index and a per-thread counter (`Mobility.nonce`).
    func seal(session: UInt64, serial: UInt32, nonce: [UInt8]) -> [UInt8]? {
        let key = keys.withLock { $0.current }
        var plaintext = [UInt8]()
        plaintext.reserveCapacity(12)
        for shift in stride(from: 56, through: 0, by: -8) { plaintext.append(UInt8(truncatingIfNeeded: session >> UInt64(shift))) }
        for shift in stride(from: 24, through: 0, by: -8) { plaintext.append(UInt8(truncatingIfNeeded: serial >> UInt32(shift))) }
        guard let sealed = SealedBox.seal(plaintext, associated: [key.id], key: key.bytes, nonce: nonce) else { return nil }
        return [key.id] + sealed
    }

    /// The session id and serial in `ticket`; nil when this process did not issue it under the
    /// current or the previous key, or it was altered.
    func open(_ ticket: UnsafeRawBufferPointer) -> (session: UInt64, serial: UInt32)? {
        guard ticket.count == MobilityTickets.length, let id = ticket.first else { return nil }
        let key = keys.withLock { k -> Key? in
            if k.current.id == id { return k.current }
            if let previous = k.previous, previous.id == id { return previous }
            return nil
        }
        guard let key,
            let plaintext = SealedBox.open(UnsafeRawBufferPointer(rebasing: ticket[1...]), associated: [id], key: key.bytes),
            plaintext.count == 12
        else { return nil }
        let session = plaintext[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let serial = plaintext[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (session, serial)
    }

    /// Records that loop thread `thread` holds the mobile allocation `session`.
    func register(session: UInt64, thread: Int) { owners.withLock { $0[session] = thread } }

    /// Forgets `session` (its allocation ended).
    func unregister(session: UInt64) { owners.withLock { $0[session] = nil } }

    /// The loop thread that holds `session`, if it is live.
    func owner(of session: UInt64) -> Int? { owners.withLock { $0[session] } }
}
