import RelayCore
import StunCodec
import Synchronization

/// A stream client's connection as the cross-loop tests see it: records each packet another
/// loop queues on it, or refuses them all while told to (a connection closing or over its
/// output bound).
final class RecordingStreamSink: StreamSink, Sendable {
    private let state = Locked<(packets: [[UInt8]], refusing: Bool)>(([], false))

    var packets: [[UInt8]] { state.withLock { $0.packets } }

    func refuse() { state.withLock { $0.refusing = true } }

    func accept() { state.withLock { $0.refusing = false } }

    func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
        state.withLock { state in
            guard !state.refusing else { return false }
            state.packets.append(Array(bytes))
            return true
        }
    }

    /// The owner core lists `client`'s stream allocation with this sink; the harness executes
    /// the writer's `deliverToStream` commands on it.
    func install(owner: RelayCore, client: TransportAddress) {
        owner.streamHooks.sink = { [unowned self] origin in
            origin.fiveTuple.client == client && origin.fiveTuple.transport.isStream ? self : nil
        }
    }
}
