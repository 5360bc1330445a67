import StunCodec

/// The allocations of one loop thread and the four ways the core finds one (RFC 8656 §2.2, §7):
/// by the client's 5-tuple (requests and ChannelData), by relay socket (a peer's packets, RFC
/// 8656 §11.3, §12.7), by relayed address in its bound and advertised forms (the relay-to-relay
/// short-circuit, from the allocation's first permission), and by mobility session (RFC 8016
/// §3.2.2).
///
/// Owned by one `RelayCore` and the only code that writes its indexes, so they cannot drift
/// apart: an allocation is listed under its current 5-tuple, under the socket and both address
/// forms of each of its relayed addresses (`main`, and `additional` in a dual allocation, RFC 8656
/// §7.2 step 9), and under its session when it is mobile. What else an allocation's start and end
/// does (the shared directory, the port pool, the outbox) stays with the core.
///
/// A lookup is one dictionary lookup: no allocation and no copy on the packet path. It is a class
/// because the core keeps it in a stored property of its own class: a struct there is copied for
/// a call (its four dictionaries retained and released) on every lookup, measured at about three
/// extra retain/release pairs per relayed packet. Its owner is one loop thread, so its indexes
/// skip the runtime's exclusivity checks (`@exclusivity(unchecked)`), as a struct's would.
final class AllocationTable {
    private let byFiveTuple = FiveTupleIndex()
    @exclusivity(unchecked) private var bySocket: [RelaySocket: Allocation] = [:]
    /// Both forms of each relayed address: bound, and advertised (`external-ip`).
    @exclusivity(unchecked) private var byRelayedAddress: [TransportAddress: Allocation] = [:]
    @exclusivity(unchecked) private var mobileBySession: [UInt64: Allocation] = [:]

    /// Live allocations (RFC 8656 §7).
    var count: Int { byFiveTuple.count }

    /// Every live allocation, in no particular order. A caller that ends allocations while it
    /// walks them collects them first (`delete` writes the table).
    var all: AllocationList { byFiveTuple.all }

    /// The allocation of a client's 5-tuple (RFC 8656 §2.2).
    @inline(__always)
    subscript(fiveTuple: FiveTuple) -> Allocation? { byFiveTuple[fiveTuple] }

    /// The allocation whose main or additional relayed address has `socket` (RFC 8656 §11.3).
    @inline(__always)
    func allocation(onRelaySocket socket: RelaySocket) -> Allocation? { bySocket[socket] }

    /// The UDP allocation that holds relayed address `address`, in its bound or advertised form
    /// (RFC 8656 §7.2); a TCP allocation's relayed address takes connections (RFC 6062 §5.3), so it
    /// is not listed here.
    @inline(__always)
    func allocation(atRelayed address: TransportAddress) -> Allocation? { byRelayedAddress[address] }

    /// The mobile allocation of a MOBILITY-TICKET's session (RFC 8016 §3.2.2).
    @inline(__always)
    func mobile(session: UInt64) -> Allocation? { mobileBySession[session] }

    /// Lists a new allocation (RFC 8656 §7.2 step 10) under its 5-tuple, each relayed address it
    /// has, and its session if `mobile` is set. Its 5-tuple must be free.
    func insert(_ allocation: Allocation) {
        assert(byFiveTuple[allocation.origin.fiveTuple] == nil, "5-tuple already has an allocation")
        byFiveTuple.insert(allocation)
        index(allocation.main, of: allocation)
        if let additional = allocation.additional { index(additional, of: allocation) }
        if allocation.mobile { mobileBySession[allocation.sessionID] = allocation }
    }

    /// Forgets an allocation that ends (RFC 8656 §7, §8): every entry it has.
    func remove(_ allocation: Allocation) {
        byFiveTuple.remove(allocation)
        if allocation.mobile, mobileBySession[allocation.sessionID] === allocation {
            mobileBySession[allocation.sessionID] = nil
        }
        if let additional = allocation.additional { unindex(additional, of: allocation) }
        unindex(allocation.main, of: allocation)
    }

    /// Moves `allocation` to the client's new 5-tuple (RFC 8016 §3.2.2): its relayed addresses
    /// and session stay; the old 5-tuple is forgotten at once. The new one must be free.
    func move(_ allocation: Allocation, to newOrigin: ClientOrigin) {
        assert(byFiveTuple[newOrigin.fiveTuple] == nil, "5-tuple already has an allocation")
        byFiveTuple.remove(allocation)
        allocation.origin = newOrigin
        byFiveTuple.insert(allocation)
    }

    /// Ends the relayed address of `family` in a dual allocation (RFC 8656 §8.1): forgets its
    /// socket and addresses, and when it was `main`, the additional one takes its place
    /// (`Allocation.dropRelay`). Returns the ended relayed address for the caller to close; nil
    /// when the allocation is not dual or has none of `family`.
    func dropRelay(family: IPAddress.Family, of allocation: Allocation) -> RelayEndpoint? {
        guard let dropped = allocation.dropRelay(of: family) else { return nil }
        unindex(dropped, of: allocation)
        return dropped
    }

    private func index(_ relay: RelayEndpoint, of allocation: Allocation) {
        bySocket[relay.relaySocket] = allocation
        // A TCP allocation's relayed address takes connections, not datagrams (RFC 6062 §5.3):
        // the relay-to-relay short-circuit never delivers to it. A UDP one is listed from its
        // first permission on (`listRelayed`).
        guard allocation.tcpRelay == nil, allocation.relayWatched else { return }
        byRelayedAddress[relay.relayedAddress] = allocation
        byRelayedAddress[relay.advertisedAddress] = allocation
    }

    /// Lists a listed UDP allocation's relayed addresses for the relay-to-relay short-circuit, at
    /// its first permission (`RelayCore.watchRelaySockets`). Before one, every packet to them is
    /// dropped (RFC 8656 §9): another allocation's packet then takes the socket path, and the
    /// target's loop drops it. An idle allocation so costs no entry here.
    func listRelayed(_ allocation: Allocation) {
        guard byFiveTuple[allocation.origin.fiveTuple] === allocation, allocation.relayWatched else { return }
        index(allocation.main, of: allocation)
        if let additional = allocation.additional { index(additional, of: allocation) }
    }

    /// Removes `relay`'s entries, each only if it still names `allocation`.
    private func unindex(_ relay: RelayEndpoint, of allocation: Allocation) {
        if bySocket[relay.relaySocket] === allocation { bySocket[relay.relaySocket] = nil }
        if byRelayedAddress[relay.relayedAddress] === allocation { byRelayedAddress[relay.relayedAddress] = nil }
        if byRelayedAddress[relay.advertisedAddress] === allocation {
            byRelayedAddress[relay.advertisedAddress] = nil
        }
    }
}
