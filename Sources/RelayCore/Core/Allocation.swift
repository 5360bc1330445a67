import StunCodec

/// One TURN allocation (RFC 8656 §6, §7): a relayed transport address bound to a client's
/// 5-tuple, with its permissions, channels, credentials and expiry. Lives on one loop thread.
///
/// A dual allocation (ADDITIONAL-ADDRESS-FAMILY, RFC 8656 §7.2) has a second relayed address of
/// the other family, `additional`, with its own socket and expiry (RFC 8656 §8.1: each family is
/// refreshed and deleted on its own). Permissions and channels are per peer IP, so each belongs
/// to the family of its peer; the relayed address of that family sends to it.
public final class Allocation {
    /// The client's 5-tuple; a mobility move (RFC 8016) replaces it.
    public internal(set) var origin: ClientOrigin
    /// The address the relay socket is bound to.
    public internal(set) var relayedAddress: TransportAddress
    /// The address advertised in XOR-RELAYED-ADDRESS (the `external-ip` public form, or the same).
    public internal(set) var advertisedAddress: TransportAddress
    /// The relay socket, owned by the I/O layer.
    public internal(set) var relaySocket: RelaySocket
    /// The second relayed address of a dual allocation: the other family's; nil otherwise.
    public internal(set) var additional: AdditionalRelay?
    /// USERNAME the allocation was created with; later requests must use the same (RFC 8656 §5, 441).
    public let username: String
    /// The long-term key of that username, kept so refreshes keep working after a secret rotation.
    public let key: [UInt8]
    /// Transaction ID of the Allocate request and the response it got, for retransmissions (RFC 8656 §7.2).
    public let allocateTransactionID: TransactionID
    var allocateResponse: [UInt8]
    public let created: Int64
    public internal(set) var expiry: Int64
    public internal(set) var permissions: [Permission] = []
    public internal(set) var channels: [ChannelBinding] = []
    public internal(set) var traffic = TrafficCounters()
    /// What admission granted (a quota share and the `max-bps` reserved); released once, when
    /// the allocation ends (docs/architecture.md, "Admission").
    public let lease: AdmissionLease
    /// The `max-bps` budget granted at Allocate; nil when `max-bps` is 0 (unlimited).
    public internal(set) var bandwidth: BandwidthBudget?
    /// A TCP allocation's peer connections (RFC 6062); nil for a UDP allocation.
    public internal(set) var tcpRelay: TCPRelayState?
    /// The Allocate carried DONT-FRAGMENT (RFC 8656 §7.2): the relay socket never fragments.
    public internal(set) var dontFragment = false
    /// Most permissions ever installed at once, and channels ever bound, for the deletion summary.
    public internal(set) var permissionsUsed = 0
    public internal(set) var channelsUsed = 0
    /// ICMP errors passed to the client in the second `icmpSecond` (RFC 8656 §11.5, at most
    /// `RelayCore.icmpIndicationsPerSecond`).
    var icmpSecond: Int64 = 0
    var icmpSent = 0
    /// The password algorithm and integrity attribute the client authenticated with (RFC 8489 §9.2).
    public internal(set) var credentials = CredentialAlgorithms()
    /// Whether the client asked for mobility (RFC 8016), and how many times it moved: the serial
    /// its current ticket carries (docs/mobility.md).
    public internal(set) var mobile = false
    public internal(set) var moves: UInt32 = 0
    /// A random id that ties the allocation's log lines together (`session` in the logs).
    public var sessionID: UInt64 = 0

    /// `sessionID` as 16 hex digits.
    public var session: String {
        let hex = String(sessionID, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    init(
        origin: ClientOrigin, relayedAddress: TransportAddress, advertisedAddress: TransportAddress,
        relaySocket: RelaySocket, username: String, key: [UInt8], transactionID: TransactionID, now: Int64, lifetime: Int64,
        lease: AdmissionLease
    ) {
        self.lease = lease
        self.origin = origin
        self.relayedAddress = relayedAddress
        self.advertisedAddress = advertisedAddress
        self.relaySocket = relaySocket
        self.username = username
        self.key = key
        self.allocateTransactionID = transactionID
        self.allocateResponse = []
        self.created = now
        self.expiry = now + lifetime
        permissions.reserveCapacity(4)
        channels.reserveCapacity(4)
    }

    /// Whether the allocation has a relayed address of `family` (RFC 8656 §10.2, §12.2: a peer
    /// of another family gets 443).
    @inlinable
    public func serves(_ family: IPAddress.Family) -> Bool {
        relayedAddress.ip.family == family || additional?.relayedAddress.ip.family == family
    }

    /// The relay socket that sends to peers of `family`.
    @inlinable
    public func relaySocket(for family: IPAddress.Family) -> RelaySocket {
        if let additional, additional.relayedAddress.ip.family == family { return additional.relaySocket }
        return relaySocket
    }

    /// The relayed address (bound and advertised forms) that sends to peers of `family`.
    @inlinable
    public func relayed(for family: IPAddress.Family) -> (bound: TransportAddress, advertised: TransportAddress) {
        if let additional, additional.relayedAddress.ip.family == family {
            return (additional.relayedAddress, additional.advertisedAddress)
        }
        return (relayedAddress, advertisedAddress)
    }

    /// When the relayed address of `family` expires.
    @inlinable
    public func expiry(for family: IPAddress.Family) -> Int64 {
        if let additional, additional.relayedAddress.ip.family == family { return additional.expiry }
        return expiry
    }

    /// True when a live permission exists for `peer`'s IP (RFC 8656 §9).
    @inlinable
    public func hasPermission(for peer: IPAddress, now: Int64) -> Bool { permissions.allows(peer, now: now) }

    /// Installs or refreshes the permission for `peer`.
    func installPermission(_ peer: IPAddress, until expiry: Int64) {
        for i in permissions.indices where permissions[i].peer == peer {
            permissions[i].expiry = expiry
            return
        }
        permissions.append(Permission(peer: peer, expiry: expiry))
        permissionsUsed += 1
    }

    /// The live channel bound to `number`.
    @inlinable
    public func channel(number: UInt16, now: Int64) -> ChannelBinding? {
        for c in channels where c.number == number && c.expiry > now { return c }
        return nil
    }

    /// The live channel bound to `peer`.
    @inlinable
    public func channel(peer: TransportAddress, now: Int64) -> ChannelBinding? { channels.live(for: peer, now: now) }

    /// Binds or refreshes `number` to `peer`.
    func bindChannel(_ number: UInt16, to peer: TransportAddress, until expiry: Int64) {
        for i in channels.indices where channels[i].number == number {
            channels[i].peer = peer
            channels[i].expiry = expiry
            return
        }
        channels.append(ChannelBinding(number: number, peer: peer, expiry: expiry))
        channelsUsed += 1
    }

    /// Drops the channels `denied` picks (a reloaded peer policy forbids their peers).
    func unbindChannels(where denied: (ChannelBinding) -> Bool) { channels.removeAll(where: denied) }

    /// Drops the permissions and channels of peers of `family` (its relayed address ended, RFC
    /// 8656 §8.1).
    func forgetPeers(of family: IPAddress.Family) {
        permissions.removeAll { $0.peer.family == family }
        channels.removeAll { $0.peer.ip.family == family }
    }

    /// Drops expired permissions and channels (RFC 8656 §9, §12).
    func sweep(now: Int64) {
        permissions.removeAll { $0.expiry <= now }
        channels.removeAll { $0.expiry <= now }
    }

    /// Number of live permissions.
    func livePermissionCount(now: Int64) -> Int { permissions.reduce(0) { $0 + ($1.expiry > now ? 1 : 0) } }
}

/// The second relayed transport address of a dual allocation (RFC 8656 §7.2 step 9).
public struct AdditionalRelay: Sendable {
    public let relayedAddress: TransportAddress
    public let advertisedAddress: TransportAddress
    public let relaySocket: RelaySocket
    public internal(set) var expiry: Int64

    init(relayedAddress: TransportAddress, advertisedAddress: TransportAddress, relaySocket: RelaySocket, expiry: Int64) {
        self.relayedAddress = relayedAddress
        self.advertisedAddress = advertisedAddress
        self.relaySocket = relaySocket
        self.expiry = expiry
    }
}
