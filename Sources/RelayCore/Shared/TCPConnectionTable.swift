import StunCodec

/// The peer connections of every loop thread's TCP allocations, by CONNECTION-ID (RFC 6062
/// §5.2, §5.3, §5.4). The ConnectionBind that claims a peer connection arrives on a new data
/// connection, which SO_REUSEPORT may hand to any loop thread; so the ids and the parked peer
/// sockets are shared, and the data connection's thread takes the peer socket and runs the pipe
/// (docs/tcp-relay.md). Touched by Connect, inbound peer connections, ConnectionBind, the end
/// of a pipe or allocation, and the once-a-second sweep: never per relayed byte.
public final class TCPConnectionTable: Sendable {
    /// Where a peer connection is.
    public enum State: Sendable, Equatable {
        /// The server's connect to the peer is in progress (Connect), or an inbound peer
        /// connection was just accepted and its socket is being parked.
        case connecting
        /// Connected, waiting for the client's ConnectionBind (at most until `deadline`); the
        /// socket is not read meanwhile, so the peer's data waits in the kernel.
        case ready(peerSocket: PeerSocket)
        /// Joined with a data connection on loop thread `thread`, which owns the socket now.
        case bound(thread: LoopIndex)
    }

    public struct Entry: Sendable, Equatable {
        public let id: PeerConnectionID
        /// The loop thread that holds the allocation.
        public let thread: LoopIndex
        /// The allocation's relay socket (its TCP listener) on that thread.
        public let relaySocket: RelaySocket
        /// The allocation's USERNAME: a ConnectionBind must carry the same (RFC 6062 §5.4).
        public let username: String
        public let peer: TransportAddress
        /// The allocation's `max-bps` budget and piped-traffic count, for the pipe's thread.
        public let account: PipeAccount
        public internal(set) var state: State
        /// Monotonic seconds by which a connecting or ready entry must move on, else it is closed.
        public internal(set) var deadline: Int64
        /// A live upgrade is handing its allocation over: no ConnectionBind takes it here
        /// (docs/live-upgrade.md).
        public internal(set) var handingOver = false
    }

    /// What a ConnectionBind found.
    public enum Claim: Sendable, Equatable {
        /// The peer socket, now the claiming thread's; the entry is `bound` to it.
        case peer(PeerSocket, Entry)
        /// No such id, or not ready (connecting, or bound already).
        case unknown
        /// Another user's connection; the entry stays as it was.
        case wrongUser
    }

    private let entries = Locked<[PeerConnectionID: Entry]>([:])

    public init() {}

    /// A new entry in `connecting` state under an id no other entry has.
    func reserve(
        thread: LoopIndex, relaySocket: RelaySocket, username: String, peer: TransportAddress, account: PipeAccount,
        deadline: Int64, random: inout FastRandom
    ) -> PeerConnectionID {
        var candidate = UInt32(truncatingIfNeeded: random.next())
        return entries.withLock { table in
            while candidate == 0 || table[PeerConnectionID(candidate)] != nil { candidate &+= 0x9E37_79B9 }
            let id = PeerConnectionID(candidate)
            table[id] = Entry(
                id: id, thread: thread, relaySocket: relaySocket, username: username, peer: peer,
                account: account, state: .connecting, deadline: deadline)
            return id
        }
    }

    /// The connect finished (or an inbound connection was accepted): the entry holds `peerSocket`
    /// until a ConnectionBind or `deadline`. False when the entry is gone (its allocation ended):
    /// the caller closes the socket.
    public func park(_ id: PeerConnectionID, peerSocket: PeerSocket, deadline: Int64) -> Bool {
        entries.withLock { table in
            guard var entry = table[id], entry.state == .connecting else { return false }
            entry.state = .ready(peerSocket: peerSocket)
            entry.deadline = deadline
            table[id] = entry
            return true
        }
    }

    /// ConnectionBind: hands the ready peer socket of `id` to `thread` if `username` matches.
    func claim(_ id: PeerConnectionID, username: String, thread: LoopIndex) -> Claim {
        entries.withLock { table in
            guard var entry = table[id], case .ready(let socket) = entry.state, !entry.handingOver else { return .unknown }
            guard entry.username == username else { return .wrongUser }
            entry.state = .bound(thread: thread)
            table[id] = entry
            return .peer(socket, entry)
        }
    }

    /// Removes `id` (its pipe or connect ended); the entry as it was, nil if it was gone.
    @discardableResult
    public func remove(_ id: PeerConnectionID) -> Entry? { entries.withLock { $0.removeValue(forKey: id) } }

    /// Removes every entry of the allocation with `relaySocket` on `thread` (it ended), for the
    /// caller to close their sockets and pipes.
    public func removeAll(thread: LoopIndex, relaySocket: RelaySocket) -> [Entry] {
        entries.withLock { table in
            let ended = table.values.filter { $0.thread == thread && $0.relaySocket == relaySocket }
            for entry in ended { table[entry.id] = nil }
            return ended
        }
    }

    /// Removes the ready entries of `thread` past their deadline (no ConnectionBind in time,
    /// RFC 6062 §5.3), for the caller to close their peer sockets.
    public func expire(thread: LoopIndex, now: Int64) -> [Entry] {
        entries.withLock { table in
            let ended = table.values.filter {
                guard $0.thread == thread, $0.deadline <= now, case .ready = $0.state else { return false }
                return true
            }
            for entry in ended { table[entry.id] = nil }
            return ended
        }
    }

    /// The entries of the allocation with `relaySocket` on `thread`, as they are now (a live
    /// upgrade's snapshot, docs/live-upgrade.md).
    public func entries(thread: LoopIndex, relaySocket: RelaySocket) -> [Entry] {
        entries.withLock { table in table.values.filter { $0.thread == thread && $0.relaySocket == relaySocket } }
    }

    /// Marks (or, after a failed upgrade, unmarks) every entry of the allocation with
    /// `relaySocket` on `thread` as handed over, and returns them: a ConnectionBind on any loop
    /// takes none of them meanwhile, so no peer socket is piped here and handed over at once.
    public func handingOver(_ handing: Bool, thread: LoopIndex, relaySocket: RelaySocket) -> [Entry] {
        entries.withLock { table in
            var marked: [Entry] = []
            for (id, entry) in table where entry.thread == thread && entry.relaySocket == relaySocket {
                table[id]!.handingOver = handing
                marked.append(table[id]!)
            }
            return marked
        }
    }

    /// Lists an entry another process handed over; false, changing nothing, when its id is
    /// taken here.
    func adopt(_ entry: Entry) -> Bool {
        entries.withLock { table in
            guard table[entry.id] == nil else { return false }
            table[entry.id] = entry
            return true
        }
    }

    /// Whether `id` is still listed (its connection is pending or piped).
    func contains(_ id: PeerConnectionID) -> Bool { entries.withLock { $0[id] != nil } }

    /// Entries listed now, for metrics and tests.
    public var count: Int { entries.withLock { $0.count } }
}
