import StunCodec

/// A UDP allocation as the journal holds it (docs/state-journal.md, "Allocation record"):
/// everything `AdoptedAllocation` carries but the socket handles, which mean nothing in another
/// process (the restoring process binds its relay sockets to the addresses again). Times are
/// absolute `CLOCK_BOOTTIME` seconds: the core's `now` and expiries as they are.
public struct JournalAllocation: Sendable, Equatable {
    /// One relayed transport address (RFC 8656 §7.2) and when its lifetime ends (§7.3).
    public struct Relay: Sendable, Equatable {
        public var address: TransportAddress
        public var expiresAt: Int64

        public init(address: TransportAddress, expiresAt: Int64) {
            self.address = address
            self.expiresAt = expiresAt
        }
    }

    /// A permission for a peer's IP (RFC 8656 §9) and when it ends.
    public struct Permission: Sendable, Equatable {
        public var peer: IPAddress
        public var expiresAt: Int64

        public init(peer: IPAddress, expiresAt: Int64) {
            self.peer = peer
            self.expiresAt = expiresAt
        }
    }

    /// A channel binding (RFC 8656 §12): its number (0x4000–0x4FFF), peer, and when it ends.
    public struct Channel: Sendable, Equatable {
        public var number: UInt16
        public var peer: TransportAddress
        public var expiresAt: Int64

        public init(number: UInt16, peer: TransportAddress, expiresAt: Int64) {
            self.number = number
            self.peer = peer
            self.expiresAt = expiresAt
        }
    }

    /// The id the allocation's log lines carry, and the key its records replace each other by.
    public var sessionID: UInt64
    /// Client address, server address and transport (RFC 8656 §2); only UDP is journaled.
    public var fiveTuple: FiveTuple
    /// The first relayed address, and a dual allocation's second one (RFC 8656 §7.2 step 9).
    public var main: Relay
    public var additional: Relay?
    public var username: String
    /// The user id quotas count (docs/auth.md).
    public var user: String
    /// The long-term key (RFC 8489 §9.2.2): 16 bytes for MD5, 32 for SHA-256, empty under
    /// `no-auth`.
    public var key: [UInt8]
    public var credentials: CredentialAlgorithms
    /// The Allocate it answered and that answer, for a retransmission (RFC 8656 §7.2).
    public var transactionID: TransactionID
    public var allocateResponse: [UInt8]
    public var permissions: [Permission]
    public var channels: [Channel]
    /// DONT-FRAGMENT (RFC 8656 §18.9): the restoring process sets it on the sockets again.
    public var dontFragment: Bool
    /// The `max-bps` its lease holds (0: none).
    public var bytesPerSecond: Int
    /// Whether it holds a mobility ticket, and its moves so far (RFC 8016).
    public var mobile: Bool
    public var moves: UInt32

    public init(
        sessionID: UInt64, fiveTuple: FiveTuple, main: Relay, additional: Relay? = nil, username: String, user: String,
        key: [UInt8], credentials: CredentialAlgorithms = CredentialAlgorithms(), transactionID: TransactionID,
        allocateResponse: [UInt8] = [], permissions: [Permission] = [], channels: [Channel] = [],
        dontFragment: Bool = false, bytesPerSecond: Int = 0, mobile: Bool = false, moves: UInt32 = 0
    ) {
        self.sessionID = sessionID
        self.fiveTuple = fiveTuple
        self.main = main
        self.additional = additional
        self.username = username
        self.user = user
        self.key = key
        self.credentials = credentials
        self.transactionID = transactionID
        self.allocateResponse = allocateResponse
        self.permissions = permissions
        self.channels = channels
        self.dontFragment = dontFragment
        self.bytesPerSecond = bytesPerSecond
        self.mobile = mobile
        self.moves = moves
    }
}

extension JournalAllocation {
    /// `adopted` without its sockets, its seconds left turned into expiries at `now`.
    public init(_ adopted: AdoptedAllocation, now: Int64) {
        func relay(_ r: AdoptedAllocation.Relay) -> Relay {
            Relay(address: r.bound, expiresAt: saturatingSum(now, r.secondsLeft))
        }
        self.init(
            sessionID: adopted.sessionID, fiveTuple: adopted.origin.fiveTuple, main: relay(adopted.main),
            additional: adopted.additional.map(relay), username: adopted.username, user: adopted.user,
            key: adopted.key, credentials: adopted.credentials, transactionID: adopted.transactionID,
            allocateResponse: adopted.allocateResponse,
            permissions: adopted.permissions.map {
                Permission(peer: $0.peer, expiresAt: saturatingSum(now, $0.secondsLeft))
            },
            channels: adopted.channels.map {
                Channel(number: $0.number, peer: $0.peer, expiresAt: saturatingSum(now, $0.secondsLeft))
            },
            dontFragment: adopted.dontFragment, bytesPerSecond: adopted.bytesPerSecond, mobile: adopted.mobile,
            moves: adopted.moves)
    }

    /// What `RelayCore.adopt` takes, with the seconds each lifetime has left at `now`: the
    /// client's packets arrive on `listener`, and the relay sockets bound again to `main.address`
    /// and `additional?.address`. Without an `additional` socket the allocation goes on with its
    /// main address alone.
    public func adopted(
        listener: ClientSocket, main mainSocket: RelaySocket, additional additionalSocket: RelaySocket?, now: Int64
    ) -> AdoptedAllocation {
        let additionalRelay = additional.flatMap { relay in
            additionalSocket.map {
                AdoptedAllocation.Relay(
                    bound: relay.address, socket: $0, secondsLeft: saturatingDifference(relay.expiresAt, now))
            }
        }
        return AdoptedAllocation(
            origin: ClientOrigin(fiveTuple: fiveTuple, socket: listener),
            main: .init(
                bound: main.address, socket: mainSocket, secondsLeft: saturatingDifference(main.expiresAt, now)),
            additional: additionalRelay, username: username, user: user, key: key, credentials: credentials,
            transactionID: transactionID, allocateResponse: allocateResponse,
            permissions: permissions.map { ($0.peer, saturatingDifference($0.expiresAt, now)) },
            channels: channels.map { ($0.number, $0.peer, saturatingDifference($0.expiresAt, now)) },
            dontFragment: dontFragment,
            bytesPerSecond: bytesPerSecond, sessionID: sessionID, mobile: mobile, moves: moves)
    }
}

/// `now + seconds`, saturating: an absurd value given in cannot trap.
private func saturatingSum(_ now: Int64, _ seconds: Int64) -> Int64 {
    let (sum, overflow) = now.addingReportingOverflow(seconds)
    return overflow ? (seconds < 0 ? .min : .max) : sum
}

/// The seconds from `now` to `expiresAt`, saturating.
private func saturatingDifference(_ expiresAt: Int64, _ now: Int64) -> Int64 {
    let (difference, overflow) = expiresAt.subtractingReportingOverflow(now)
    return overflow ? (now < 0 ? .max : .min) : difference
}
