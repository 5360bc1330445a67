import Glibc
import RelayCore

extension RelaySocketOpening {
    /// The outcome of a failed `socket()`, `bind()` or `listen()`, by its errno: out of
    /// descriptors or memory is `.exhausted` (no other port would do better), anything else
    /// (EADDRINUSE above all) `.portInUse`.
    init(failure errno: Int32) {
        switch errno {
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: self = .exhausted
        default: self = .portInUse
        }
    }
}
