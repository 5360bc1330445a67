import Glibc
import RelayCore

extension RelaySocketOpening {
    /// The outcome of a failed `socket()`, `bind()` or `listen()`, by its errno: out of
    /// descriptors or memory is `.exhausted` (no other port would do better), EADDRINUSE
    /// `.portInUse` (another socket holds the port), anything else `.failed`.
    init(failure errno: Int32) {
        switch errno {
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: self = .exhausted
        case EADDRINUSE: self = .portInUse
        default: self = .failed
        }
    }
}
