import StunCodec
import Synchronization

/// Relay-to-relay packets other loop threads hand to one loop thread whose allocation has a
/// TCP or TLS client (issue #6). Only that loop may write the client's stream, so a sending loop
/// cannot frame and send the packet itself as it does for a UDP client; instead of crossing two
/// relay sockets (a loopback send, a receive and a wakeup), the payload is copied here and the
/// owning loop is woken once per batch. The owner then treats each packet exactly as one that
/// arrived on the target's relay socket from the source address: its permission and the peer
/// policy are checked there (RFC 8656 §9), and it is framed as ChannelData or a Data indication.
///
/// Two fixed arenas swap between the senders (filling one under the lock) and the owner
/// (draining the other without it), so the data path takes no heap allocation. A full arena
/// refuses the packet and the sender uses the relay socket path instead.
public final class HandOffInbox: Sendable {
    /// One handed-off packet: the target allocation's relayed address (bound form), the source
    /// as the target knows it, and where its payload sits in the batch's arena.
    public struct Record: Sendable {
        public var target: TransportAddress
        public var source: TransportAddress
        public var payload: Range<Int>
    }

    /// Packets taken in one go by the owning loop. Used by one thread at a time: senders fill it
    /// under the lock, the owner reads it after `take()` and hands it back with `recycle(_:)`.
    /// Fixed storage, no reference counting: handing a batch between threads copies no heap.
    public struct Batch: @unchecked Sendable {
        /// Each payload has `RelayCore.peerHeadroom` free bytes before it and
        /// `RelayCore.peerTailroom` after it, as a relay-socket read has.
        public let arena: UnsafeMutableRawBufferPointer
        fileprivate let storage: UnsafeMutableBufferPointer<Record>
        fileprivate var count = 0
        fileprivate var used = 0

        public var records: UnsafeBufferPointer<Record> { UnsafeBufferPointer(rebasing: storage[..<count]) }

        fileprivate init(bytes: Int, records capacity: Int) {
            arena = .allocate(byteCount: bytes, alignment: 64)
            storage = .allocate(capacity: max(1, capacity))
        }

        fileprivate func deallocate() {
            arena.deallocate()
            storage.deallocate()
        }
    }

    private struct State {
        var filling: Batch
        var spare: Batch?
        /// Wakes the owning loop; set by `attach`, called under the lock when a packet lands in
        /// an empty arena, nil while no loop is attached.
        var wake: (@Sendable () -> Void)?
    }

    public static let arenaBytes = 256 * 1024
    public static let maxRecords = 2048
    private let state: Mutex<State>

    public init(arenaBytes: Int = HandOffInbox.arenaBytes, maxRecords: Int = HandOffInbox.maxRecords) {
        state = Mutex(
            State(
                filling: Batch(bytes: arenaBytes, records: maxRecords),
                spare: Batch(bytes: arenaBytes, records: maxRecords)))
    }

    deinit {
        state.withLock { s in
            s.filling.deallocate()
            s.spare?.deallocate()
        }
    }

    /// Called on the owning loop's thread once its event exists; `wake` activates it (libevent
    /// allows that from any thread).
    public func attach(wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Called on the owning loop's thread before it frees the event; later packets wait unread.
    public func detach() {
        state.withLock { $0.wake = nil }
    }

    /// From a sending loop: copies `payload` in for the allocation at `target`; false when the
    /// arena is full (the caller sends through the relay socket instead). The owner is woken
    /// when the packet is the first since its last `take()`, under the lock, so the wake-up
    /// never races with `detach` and the event being freed.
    public func post(to target: TransportAddress, from source: TransportAddress, payload: UnsafeRawBufferPointer) -> Bool {
        let headroom = RelayCore.peerHeadroom
        let need = (headroom + payload.count + RelayCore.peerTailroom + 15) & ~15
        return state.withLock { s in
            let start = s.filling.used
            guard start + need <= s.filling.arena.count, s.filling.count < s.filling.storage.count else {
                return false
            }
            if let base = payload.baseAddress {
                (s.filling.arena.baseAddress! + start + headroom).copyMemory(from: base, byteCount: payload.count)
            }
            s.filling.used = start + need
            (s.filling.storage.baseAddress! + s.filling.count).initialize(
                to: Record(target: target, source: source, payload: start + headroom..<start + headroom + payload.count))
            s.filling.count += 1
            if s.filling.count == 1 { s.wake?() }
            return true
        }
    }

    /// On the owning loop: the packets posted since the last call (nil if none). Hand the batch
    /// back with `recycle(_:)` once nothing points into its arena any more (after the flush).
    public func take() -> Batch? {
        state.withLock { s -> Batch? in
            guard s.filling.count > 0, let spare = s.spare else { return nil }
            let full = s.filling
            s.filling = spare
            s.spare = nil
            return full
        }
    }

    /// On the owning loop: returns a drained batch for reuse.
    public func recycle(_ batch: Batch) {
        var batch = batch
        batch.count = 0
        batch.used = 0
        state.withLock { s in s.spare = batch }
    }
}
