import StunCodec
import Synchronization

/// The allocations of every loop thread by relayed transport address (bound form): what another
/// thread needs to hand a relay-to-relay packet straight to the allocation's client. The
/// client's address and listener, or for a TCP/TLS client its connection (`StreamSink`), its
/// permissions and channels (RFC 8656 §9, §12) and its expiry.
///
/// It extends the relay-to-relay short-circuit across loop threads. SO_REUSEPORT
/// spreads the two clients of a call over the loops at random, so with N loops only 1/N of the
/// pairs meet on one thread. The owning thread writes an entry from the allocation's first
/// permission on, whenever that state changes (CreatePermission, ChannelBind, Refresh,
/// deletion: the control plane); the other
/// threads read it once per relayed packet. Entries are sharded by port so two loops rarely
/// meet on one lock, and a reader copies out only a few value fields: no heap traffic.
public final class RelayedAddressDirectory: Sendable {
    struct Entry: Sendable {
        var client: TransportAddress
        var server: TransportAddress
        var expiry: Int64
        var permissions: [Permission]
        var channels: [ChannelBinding]
        /// Packets and bytes other threads delivered to the client; the owner adds them to the
        /// allocation's totals when it deletes the allocation.
        var packetsDelivered: UInt64 = 0
        var bytesDelivered: UInt64 = 0
        /// A TCP/TLS client's connection; nil for UDP.
        var sink: (any StreamSink)?
        /// The allocation's `max-bps` budget (shared with its owner thread); nil when unlimited.
        var budget: BandwidthBudget?
    }

    /// Where the client of the target allocation is, and the channel to frame the payload with
    /// (nil: a Data indication), as the target would have framed it (RFC 8656 §11.3, §12.7).
    struct Delivery {
        /// The sending allocation's relayed address in the form the target knows (`knownForm`).
        var source: TransportAddress
        var client: TransportAddress
        var server: TransportAddress
        var channelNumber: UInt16?
        /// For a TCP/TLS client: its connection, which takes the packet from this thread.
        var sink: (any StreamSink)?
    }

    /// A relay-to-relay packet's source: the sending allocation's relayed address in its
    /// advertised and bound forms (the same without `external-ip`), with the sender's peer-policy
    /// verdict on each; the target's permissions choose the form.
    struct SourceForms {
        var advertised: TransportAddress
        var bound: TransportAddress
        var advertisedAllowed: Bool
        var boundAllowed: Bool
    }

    enum Verdict {
        /// No allocation of another thread has this relayed address.
        case notFound
        /// The target has no live permission for the source's IP (RFC 8656 §9): drop.
        case noPermission
        /// The peer policy denies the source address (the caller's verdict): drop.
        case policy
        /// The target's `max-bps` budget for this second is spent: drop.
        case bandwidth
        case deliver(Delivery)
    }

    private final class Shard: Sendable {
        let entries = Locked<[TransportAddress: Entry]>([:])
    }

    private let shards: [Shard]

    public init(shardCount: Int = 16) {
        shards = (0..<max(1, shardCount)).map { _ in Shard() }
    }

    @inline(__always)
    private func shard(_ relayed: TransportAddress) -> Shard { shards[Int(relayed.port) % shards.count] }

    /// Writes `allocation`'s current client (for a TCP/TLS client, its connection `sink`),
    /// permissions, channels and expiry (owner thread only), under each of its relayed addresses
    /// (two for a dual allocation, each with its own expiry). An allocation that never had a
    /// permission is not listed: another thread's packet to it then leaves through the sender's
    /// relay socket and is dropped by the target's loop, as a peer's would be.
    func publish(_ allocation: Allocation, sink: (any StreamSink)?) {
        publish(allocation, relayed: allocation.relayedAddress, expiry: allocation.expiry, sink: sink)
        if let additional = allocation.additional {
            publish(allocation, relayed: additional.relayedAddress, expiry: additional.expiry, sink: sink)
        }
    }

    private func publish(
        _ allocation: Allocation, relayed: TransportAddress, expiry: Int64, sink: (any StreamSink)?
    ) {
        shard(relayed).entries.withLock { entries in
            if entries[relayed] == nil {
                // Listed from its first permission: before it, every packet to it is dropped
                // (RFC 8656 §9), which the target's own relay socket path does as well, so an
                // idle allocation costs no entry (docs/benchmark.md, "Node capacity").
                guard !allocation.permissions.isEmpty else { return }
                entries[relayed] = Entry(
                    client: allocation.origin.fiveTuple.client, server: allocation.origin.fiveTuple.server,
                    expiry: expiry, permissions: allocation.permissions, channels: allocation.channels,
                    sink: sink, budget: allocation.bandwidth)
            } else {
                entries[relayed]!.expiry = expiry
                entries[relayed]!.permissions = allocation.permissions
                entries[relayed]!.channels = allocation.channels
            }
        }
    }

    /// Removes the entry of a deleted allocation; returns what other threads delivered to its client.
    func remove(_ relayed: TransportAddress) -> (packets: UInt64, bytes: UInt64) {
        let entry = shard(relayed).entries.withLock { $0.removeValue(forKey: relayed) }
        return (entry?.packetsDelivered ?? 0, entry?.bytesDelivered ?? 0)
    }

    /// Decides a packet from another allocation's relayed address (`source`, in the form the
    /// target knows it by) to the allocation at `relayed` (bound form), and counts it when it is
    /// to be delivered. The same checks as the target's own relay socket path: a live allocation
    /// and a live permission for the source's IP, then the caller's peer-policy verdict on that
    /// form, then the target's `max-bps` budget, which a delivered packet takes `bytes` from.
    func deliver(to relayed: TransportAddress, from source: SourceForms, bytes: Int, now: Int64) -> Verdict {
        shard(relayed).entries.withLock { entries in
            guard let index = entries.index(forKey: relayed) else { return .notFound }
            return Self.judge(&entries.values[index], from: source, bytes: bytes, now: now)
        }
    }

    /// Takes back the count of one packet `deliver` counted that never reached the client: its
    /// connection refused it, it could not be framed, or this thread had no listener to send it
    /// from (then it goes through the relay socket, where the target charges it again), and
    /// gives its bytes back to the target's `max-bps` budget. An entry replaced in between (a new
    /// allocation on the port) keeps counts that are too small to take it from.
    func retract(_ relayed: TransportAddress, bytes: Int, now: Int64) {
        shard(relayed).entries.withLock { entries in
            guard let index = entries.index(forKey: relayed) else { return }
            guard entries.values[index].packetsDelivered > 0,
                entries.values[index].bytesDelivered >= UInt64(bytes)
            else { return }
            entries.values[index].budget?.refund(.toClient, bytes: bytes, now: now)
            entries.values[index].packetsDelivered -= 1
            entries.values[index].bytesDelivered -= UInt64(bytes)
        }
    }

    /// `deliver`'s checks on one entry, read and counted in place (no copy of its arrays).
    private static func judge(_ entry: inout Entry, from forms: SourceForms, bytes: Int, now: Int64) -> Verdict {
        guard entry.expiry > now else { return .notFound }
        let source = entry.permissions.knownForm(advertised: forms.advertised, bound: forms.bound, now: now)
        guard entry.permissions.allows(source.ip, now: now) else { return .noPermission }
        guard source == forms.advertised ? forms.advertisedAllowed : forms.boundAllowed else { return .policy }
        if let budget = entry.budget, !budget.admit(.toClient, bytes: bytes, now: now) { return .bandwidth }
        entry.packetsDelivered &+= 1
        entry.bytesDelivered &+= UInt64(bytes)
        return .deliver(
            Delivery(
                source: source, client: entry.client, server: entry.server,
                channelNumber: entry.channels.live(for: source, now: now)?.number, sink: entry.sink))
    }

    /// What other threads have delivered so far to the client of the allocation at `relayed`
    /// (bound form), or nil when it is not listed (tests).
    public func delivered(to relayed: TransportAddress) -> (packets: UInt64, bytes: UInt64)? {
        shard(relayed).entries.withLock { entries in
            entries[relayed].map { ($0.packetsDelivered, $0.bytesDelivered) }
        }
    }

    /// Number of listed allocations (tests and metrics).
    public var count: Int { shards.reduce(0) { $0 + $1.entries.withLock { $0.count } } }
}
