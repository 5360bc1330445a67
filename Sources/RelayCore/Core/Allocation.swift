import StunCodec

/// One TURN allocation (RFC 8656 §6, §7): a relayed transport address bound to a client's
/// 5-tuple, with its permissions, channels, credentials and expiry. Lives on one loop thread,
/// indexed by that loop's `AllocationTable`.
///
/// A dual allocation (ADDITIONAL-ADDRESS-FAMILY, RFC 8656 §7.2) has a second relayed address of
/// the other family, `additional`, with its own socket and expiry (RFC 8656 §8.1: each family is
/// refreshed and deleted on its own). Permissions and channels are per peer IP, so each belongs
/// to the family of its peer; the relayed address of that family sends to it.
public final class Allocation {
    /// The client's 5-tuple; a mobility move (RFC 8016) replaces it (`AllocationTable.move`).
    public internal(set) var origin: ClientOrigin
    /// The relayed address the allocation was created with (RFC 8656 §7.2), or, once that one
    /// ended in a dual allocation, the one that took its place (RFC 8656 §8.1).
    public internal(set) var main: RelayEndpoint
    /// The second relayed address of a dual allocation: the other family's (RFC 8656 §7.2 step
    /// 9); nil otherwise. Kept out of line (`dual`), since few allocations are dual.
    public internal(set) var additional: RelayEndpoint? {
        @inlinable get { dual?.endpoint }
        set { dual = newValue.map(DualRelay.init) }
    }
    @usableFromInline var dual: DualRelay?
    /// `main`'s bound address (RFC 8656 §7.2).
    @inlinable public var relayedAddress: TransportAddress { main.relayedAddress }
    /// `main`'s address as XOR-RELAYED-ADDRESS gives it (RFC 8656 §7.2, §18.5).
    @inlinable public var advertisedAddress: TransportAddress { main.advertisedAddress }
    /// `main`'s relay socket, owned by the I/O layer (RFC 8656 §7.2).
    @inlinable public var relaySocket: RelaySocket { main.relaySocket }
    /// When `main` expires (RFC 8656 §7.2, §8.1); `additional` has its own.
    @inlinable public var expiry: Int64 { main.expiry }
    /// USERNAME the allocation was created with; later requests must use the same (RFC 8656 §5, 441).
    public var username: String { storedUsername.string }
    private let storedUsername: StoredUsername
    /// The long-term key of that username, kept so refreshes keep working after a secret rotation.
    public var key: [UInt8] { storedKey.bytes }
    private let storedKey: StoredKey
    /// The success response the Allocate got, for its retransmissions (RFC 8656 §7.2), when it
    /// cannot be written again from the allocation (it carried a RESERVATION-TOKEN, an
    /// ADDRESS-ERROR-CODE or a MOBILITY-TICKET, or was adopted so); empty otherwise, and once
    /// `allocateResponseKept` has passed: no client retransmits that late.
    public internal(set) var allocateResponse: [UInt8]
    public let created: Int64
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
    /// The traffic an adopted allocation carried in the process before (an RFC 6062
    /// allocation's piped bytes), which usage accounting does not count twice (docs/usage.md);
    /// zero, and not stored, for any other.
    public internal(set) var carried: TrafficCounters {
        get { carriedBefore?.counters ?? TrafficCounters() }
        set { carriedBefore = newValue == TrafficCounters() ? nil : CarriedTraffic(newValue) }
    }
    private var carriedBefore: CarriedTraffic?
    /// A random id that ties the allocation's log lines together (`session` in the logs).
    public var sessionID: UInt64 = 0
    /// ICMP errors passed to the client in the second `icmpSecond` (RFC 8656 §11.5, at most
    /// `RelayCore.icmpIndicationsPerSecond`).
    var icmpSecond: Int64 = 0
    /// The tenant it belongs to (docs/tenants.md): an index of `CoreContext.tenants`, 0 for the
    /// default tenant.
    public internal(set) var tenant = 0
    /// Transaction ID of the Allocate request, for its retransmissions (RFC 8656 §7.2).
    public let allocateTransactionID: TransactionID
    // The small fields last, together, so that they share their words (the object's size is
    // what an idle allocation costs; docs/benchmark.md, "Node capacity").
    /// How many times the client moved (RFC 8016): the serial its current ticket carries
    /// (docs/mobility.md).
    public internal(set) var moves: UInt32 = 0
    private var permissionsInstalled: UInt32 = 0
    private var channelsBound: UInt32 = 0
    var icmpSent: UInt16 = 0
    /// The password algorithm and integrity attribute the client authenticated with (RFC 8489 §9.2),
    /// kept as its position among `CredentialAlgorithms.all` (one byte, not seventeen).
    public internal(set) var credentials: CredentialAlgorithms {
        get { CredentialAlgorithms.all[Int(credentialsIndex)] }
        set { credentialsIndex = UInt8(newValue.index) }
    }
    private var credentialsIndex: UInt8 = 0
    /// The Allocate carried DONT-FRAGMENT (RFC 8656 §7.2): the relay socket never fragments.
    public internal(set) var dontFragment = false
    /// Whether the client asked for mobility (RFC 8016; docs/mobility.md).
    public internal(set) var mobile = false
    /// Adopted by this process with its sockets open (a live upgrade, a restore).
    public internal(set) var adopted = false
    /// A retransmitted Allocate gets its success response written again, the same bytes
    /// (`RelayCore.resendAllocateResponse`), until `allocateResponseKept` has passed; kept as
    /// bytes, it would cost every allocation about 130 B (docs/benchmark.md, "Node capacity").
    var rebuildsAllocateResponse = false
    /// The Allocate carried FINGERPRINT, so its response does (RFC 8489 §14.7).
    var allocateFingerprinted = false
    /// Its response carried MESSAGE-INTEGRITY-SHA256 (RFC 8489 §14.6): the request had it, or
    /// PASSWORD-ALGORITHM.
    var allocateIntegritySHA256 = false
    /// Its relay sockets are read (`CoreCommand.watchRelaySocket`): it has had a permission.
    var relayWatched = false

    /// Most permissions ever installed at once, and channels ever bound, for the deletion summary.
    public var permissionsUsed: Int { Int(permissionsInstalled) }
    public var channelsUsed: Int { Int(channelsBound) }

    /// `sessionID` as 16 hex digits.
    public var session: String {
        let hex = String(sessionID, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// A new allocation (RFC 8656 §7.2 step 10); `main.expiry` is its lifetime's end.
    init(
        origin: ClientOrigin, main: RelayEndpoint, username: String, key: [UInt8], transactionID: TransactionID,
        now: Int64, lease: AdmissionLease
    ) {
        self.lease = lease
        self.origin = origin
        self.main = main
        self.storedUsername = StoredUsername(username)
        self.storedKey = StoredKey(key)
        self.allocateTransactionID = transactionID
        self.allocateResponse = []
        self.created = now
    }

    /// How long the Allocate's success response is kept for retransmissions: a client's
    /// transaction over UDP gives up after 39.5 s with the default RTO and Rc (RFC 8489 §6.2.1).
    /// Over TCP and TLS nothing is retransmitted, but the rule is kept the same.
    static let allocateResponseKept: Int64 = 40

    /// Ends the relayed address of `family` in a dual allocation and returns it (RFC 8656 §8.1);
    /// when it is `main`, the additional one takes its place. Nil, and nothing changes, when the
    /// allocation is not dual or has no relayed address of `family`. Only `AllocationTable`
    /// calls it, so its indexes follow.
    func dropRelay(of family: IPAddress.Family) -> RelayEndpoint? {
        guard let second = additional else { return nil }
        if second.relayedAddress.ip.family == family {
            additional = nil
            return second
        }
        guard main.relayedAddress.ip.family == family else { return nil }
        let first = main
        main = second
        additional = nil
        return first
    }

    /// Whether the allocation has a relayed address of `family` (RFC 8656 §10.2, §12.2: a peer
    /// of another family gets 443).
    @inlinable
    public func serves(_ family: IPAddress.Family) -> Bool {
        relayedAddress.ip.family == family || additional?.relayedAddress.ip.family == family
    }

    /// The relay socket that sends to peers of `family` (RFC 8656 §7.2 step 9, §11.2).
    @inlinable
    public func relaySocket(for family: IPAddress.Family) -> RelaySocket {
        if let additional, additional.relayedAddress.ip.family == family { return additional.relaySocket }
        return relaySocket
    }

    /// The relayed address (bound and advertised forms) that sends to peers of `family` (RFC 8656
    /// §7.2 step 9).
    @inlinable
    public func relayed(for family: IPAddress.Family) -> (bound: TransportAddress, advertised: TransportAddress) {
        if let additional, additional.relayedAddress.ip.family == family {
            return (additional.relayedAddress, additional.advertisedAddress)
        }
        return (relayedAddress, advertisedAddress)
    }

    /// When the relayed address of `family` expires (RFC 8656 §8.1).
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
        permissionsInstalled &+= 1
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
        channelsBound &+= 1
    }

    /// Drops the channels `denied` picks (a reloaded peer policy forbids their peers).
    func unbindChannels(where denied: (ChannelBinding) -> Bool) { channels.removeAll(where: denied) }

    /// Drops the permissions and channels of peers of `family` (its relayed address ended, RFC
    /// 8656 §8.1).
    func forgetPeers(of family: IPAddress.Family) {
        permissions.removeAll { $0.peer.family == family }
        channels.removeAll { $0.peer.ip.family == family }
    }

    /// Drops expired permissions and channels (RFC 8656 §9, §12), and the Allocate's response
    /// (or the promise to write it again) once no retransmission can come. An array is changed
    /// only when something in it expired: it may share its storage with the cross-thread
    /// directory, and a removal that finds nothing would still copy it.
    func sweep(now: Int64) {
        if permissions.contains(where: { $0.expiry <= now }) { permissions.removeAll { $0.expiry <= now } }
        if channels.contains(where: { $0.expiry <= now }) { channels.removeAll { $0.expiry <= now } }
        if now - created >= Self.allocateResponseKept {
            if !allocateResponse.isEmpty { allocateResponse = [] }
            rebuildsAllocateResponse = false
        }
    }

    /// Whether `username` is the one the allocation was created with (RFC 8656 §5).
    func isUsername(_ username: String) -> Bool { storedUsername.matches(username) }

    /// Number of live permissions.
    func livePermissionCount(now: Int64) -> Int { permissions.reduce(0) { $0 + ($1.expiry > now ? 1 : 0) } }
}

/// The second relayed address of a dual allocation (RFC 8656 §7.2 step 9), boxed so that an
/// allocation with one relayed address, the common case, does not carry room for two.
@usableFromInline
final class DualRelay {
    @usableFromInline let endpoint: RelayEndpoint
    init(_ endpoint: RelayEndpoint) { self.endpoint = endpoint }
}

/// What an adopted allocation carried before (`Allocation.carried`), boxed: few have any.
private final class CarriedTraffic {
    let counters: TrafficCounters
    init(_ counters: TrafficCounters) { self.counters = counters }
}

/// One relayed transport address of an allocation (RFC 8656 §2, §7.2): the address its relay
/// socket is bound to, the form XOR-RELAYED-ADDRESS advertises, the socket, and when it expires.
/// An allocation has one, `main`, and a dual allocation a second of the other family,
/// `additional` (RFC 8656 §7.2 step 9), each refreshed and ended on its own (RFC 8656 §8.1).
public struct RelayEndpoint: Sendable {
    /// The address the relay socket is bound to.
    public let relayedAddress: TransportAddress
    /// The address advertised in XOR-RELAYED-ADDRESS (RFC 8656 §18.5): the `external-ip` public
    /// form, or the same.
    public let advertisedAddress: TransportAddress
    /// The relay socket, owned by the I/O layer.
    public let relaySocket: RelaySocket
    /// When this relayed address expires unless refreshed (RFC 8656 §8.1).
    public internal(set) var expiry: Int64

    init(relayedAddress: TransportAddress, advertisedAddress: TransportAddress, relaySocket: RelaySocket, expiry: Int64) {
        self.relayedAddress = relayedAddress
        self.advertisedAddress = advertisedAddress
        self.relaySocket = relaySocket
        self.expiry = expiry
    }
}
