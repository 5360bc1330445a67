import CLibevent
import Glibc

extension RelayServer {
    /// Adds SIGHUP to the main thread's loop: reloads the TLS certificate and key (new connections
    /// use them, open ones keep theirs). Returns the event for the caller to free.
    func addReloadSignal(to base: OpaquePointer) -> OpaquePointer {
        let event = event_new(
            base, SIGHUP, Int16(EV_SIGNAL | EV_PERSIST),
            { _, _, arg in Unmanaged<StreamService>.fromOpaque(arg!).takeUnretainedValue().reloadTLS() },
            Unmanaged.passUnretained(streams).toOpaque())!
        event_add(event, nil)
        return event
    }
}
