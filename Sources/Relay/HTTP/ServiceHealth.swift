import RelayCore
import Synchronization

/// What `/readyz` reports: ready once every listener is up, until the server starts draining
/// or shutting down. Written by the main thread, read by the HTTP handler.
public final class ServiceHealth: Sendable {
    private struct State {
        var listening = false
        var draining = false
    }

    private let state = Locked(State())

    public init() {}

    /// Every STUN/TURN and HTTP listener is bound and its loop running.
    public func markListening() { state.withLock { $0.listening = true } }

    /// Draining (or shutting down): new work should go elsewhere.
    public func setDraining(_ draining: Bool) { state.withLock { $0.draining = draining } }

    public var isReady: Bool { state.withLock { $0.listening && !$0.draining } }

    public var isDraining: Bool { state.withLock { $0.draining } }
}
