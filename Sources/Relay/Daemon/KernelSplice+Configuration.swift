import FastPath
import Logging

extension KernelSplice {
    /// Loads the RFC 6062 pipes' sockmap program (docs/tcp-relay.md, "In the kernel") from beside
    /// the fast path's object, when `kernel-offload` is not off: with `on` a failure stops the
    /// start, as the fast path's does; with `auto` it is logged and pipes stay in user space.
    static func start(configuration c: RelayConfiguration, logger: Logger) throws(RelayServer.StartError) -> KernelSplice? {
        guard c.kernelOffload != .off else { return nil }
        let failure: String
        if let fastPath = KernelFastPath.locateObject(configured: c.kernelOffloadObject).path {
            let path = objectPath(besideFastPath: fastPath)
            do {
                let splice = try KernelSplice(objectPath: path)
                logger.info("RFC 6062 pipes spliced in the kernel", metadata: ["event": "tcp_splice_attached", "object": "\(path)"])
                return splice
            } catch {
                failure = error.description
            }
        } else {
            failure = "no fast path object beside which to look"
        }
        if c.kernelOffload == .on {
            throw RelayServer.StartError(description: "kernel-offload: TCP splice: \(failure)")
        }
        logger.warning(
            "TCP splice not available, RFC 6062 pipes stay in user space",
            metadata: ["event": "tcp_splice_unavailable", "reason": "\(failure)"])
        return nil
    }
}
