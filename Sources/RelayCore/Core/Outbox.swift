import StunCodec

/// Where an outbound packet goes: back to a client, or from an allocation's relay socket to a peer.
public enum Route: Hashable, Sendable {
    case client(ClientOrigin)
    case peer(relaySocket: RelaySocket, peer: TransportAddress)
}

/// One packet the I/O layer must send. `bytes` points either into the outbox's arena (responses)
/// or into the receive buffer the packet arrived in (relayed payloads rewritten in place), both
/// valid until the outbox is flushed.
public struct OutboundPacket {
    public var route: Route
    public var bytes: UnsafeRawBufferPointer
    /// A datagram for a peer that must leave unfragmented, DF set (a Send indication's
    /// DONT-FRAGMENT, RFC 8656 §11.2), from a socket that does not do so for every datagram.
    public var dontFragment: Bool

    @inlinable
    public init(route: Route, bytes: UnsafeRawBufferPointer, dontFragment: Bool = false) {
        self.route = route
        self.bytes = bytes
        self.dontFragment = dontFragment
    }
}

/// The core's actions for one loop iteration, as one ordered stream (docs/architecture.md, "The
/// command flow"): packets to send and other effects (`CoreCommand`), in the order the core
/// emitted them. The core states its ordering rules by that order: a channel's route and a moved
/// client's socket are emitted before the answer that confirms them. The I/O layer executes the
/// stream in order (`forEachInOrder`); it may hold packets back to send them in one batch
/// (sendmmsg), which delays a packet but never moves one ahead of an effect emitted before it.
/// Collected without allocating.
///
/// One loop thread owns it (the core's, docs/architecture.md "Threads"), so its stored
/// properties skip the runtime's exclusivity checks (`@exclusivity(unchecked)`): each would
/// otherwise cost a `swift_beginAccess` call per packet and per flush, counted at about five per
/// flush with a uprobe on the runtime.
public final class Outbox {
    /// Scratch memory for responses the core builds.
    let arena: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) var arenaUsed = 0
    @exclusivity(unchecked) public private(set) var packets: [OutboundPacket] = []
    /// Effects other than sending (`CoreCommand`), in the order emitted.
    @exclusivity(unchecked) public private(set) var commands: [CoreCommand] = []
    /// Where each command stands in the stream: command `i` comes after `packets[..<positions[i]]`
    /// and before the rest.
    @exclusivity(unchecked) public private(set) var commandPositions: [Int] = []
    public let packetCapacity: Int

    /// Largest STUN response the core writes (error responses, Allocate success with all attributes).
    public static let maxResponseLength = 1024

    public init(packetCapacity: Int = 256, arenaBytes: Int = 256 * 1024) {
        self.packetCapacity = packetCapacity
        arena = UnsafeMutableRawBufferPointer.allocate(byteCount: arenaBytes, alignment: 16)
        packets.reserveCapacity(packetCapacity)
        commands.reserveCapacity(64)
        commandPositions.reserveCapacity(64)
    }

    deinit { arena.deallocate() }

    /// True when the I/O layer should flush before handing the core more input.
    public var needsFlush: Bool {
        packets.count >= packetCapacity - 2 || arena.count - arenaUsed < 2 * Outbox.maxResponseLength
    }

    /// True when one more response fits.
    public var hasRoomForResponse: Bool {
        packets.count < packetCapacity && arena.count - arenaUsed >= Outbox.maxResponseLength
    }

    /// Scratch space for a response of at most `maxResponseLength` bytes.
    @usableFromInline
    func scratch() -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: arena[arenaUsed..<min(arena.count, arenaUsed + Outbox.maxResponseLength)])
    }

    /// Queues the first `length` bytes of the last `scratch()` for `route`.
    @usableFromInline
    func commitScratch(length: Int, route: Route) {
        let bytes = UnsafeRawBufferPointer(rebasing: arena[arenaUsed..<arenaUsed + length])
        arenaUsed += (length + 15) & ~15
        append(OutboundPacket(route: route, bytes: bytes))
    }

    /// Scratch space of `count` bytes in the arena for a packet the core frames itself (a relayed
    /// payload copied for the relay-to-relay short-circuit), or nil when the arena is too full.
    /// The caller queues part of it with `enqueue` and then calls `claim(count)`.
    func scratch(count: Int) -> UnsafeMutableRawBufferPointer? {
        guard packets.count < packetCapacity, arena.count - arenaUsed >= count else { return nil }
        return UnsafeMutableRawBufferPointer(rebasing: arena[arenaUsed..<arenaUsed + count])
    }

    /// Marks the last `scratch(count:)` as used until the next flush.
    func claim(_ count: Int) {
        arenaUsed += (count + 15) & ~15
    }

    /// Queues bytes that live elsewhere (a receive buffer) until the next flush.
    @inlinable
    public func enqueue(_ bytes: UnsafeRawBufferPointer, route: Route, dontFragment: Bool = false) {
        append(OutboundPacket(route: route, bytes: bytes, dontFragment: dontFragment))
    }

    /// Queues a copy of `bytes` (a cached response) for `route`.
    func enqueueCopy(_ bytes: UnsafeRawBufferPointer, route: Route) {
        guard bytes.count <= Outbox.maxResponseLength, hasRoomForResponse else { return }
        let buffer = scratch()
        buffer.copyMemory(from: bytes)
        commitScratch(length: bytes.count, route: route)
    }

    @usableFromInline
    func append(_ packet: OutboundPacket) {
        if packets.count < packetCapacity { packets.append(packet) }
    }

    /// Queues an effect for the I/O layer, after every packet queued so far.
    func emit(_ command: CoreCommand) {
        commands.append(command)
        commandPositions.append(packets.count)
    }

    /// The stream in the order the core emitted it: each packet to `packet`, each command to
    /// `command`.
    @inlinable
    public func forEachInOrder(packet: (OutboundPacket) -> Void, command: (CoreCommand) -> Void) {
        var next = 0
        for (index, effect) in commands.enumerated() {
            let position = commandPositions[index]
            while next < position {
                packet(packets[next])
                next += 1
            }
            command(effect)
        }
        while next < packets.count {
            packet(packets[next])
            next += 1
        }
    }

    /// Forgets every queued packet and command; call after the I/O layer has executed them.
    public func reset() {
        packets.removeAll(keepingCapacity: true)
        if !commands.isEmpty {
            commands.removeAll(keepingCapacity: true)
            commandPositions.removeAll(keepingCapacity: true)
        }
        arenaUsed = 0
    }
}
