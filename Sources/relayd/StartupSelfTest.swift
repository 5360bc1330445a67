import Foundation
import Logging
import Relay
import StunCodec

/// `relayd serve --self-test`: once the server is up (`RelayServer.onStarted`), a STUN Binding
/// from each relay address to the server's own UDP listener, each result logged as event
/// `self_test`. Runs on its own thread so the main loop never waits for it.
enum StartupSelfTest {
    /// Runs the self-test for `configuration` (as loaded: unset addresses resolve as the server
    /// resolves them) on a new thread.
    static func launch(configuration: RelayConfiguration, interfaceAddresses: [IPAddress], logger: Logger) {
        let thread = Thread {
            run(configuration: configuration, interfaceAddresses: interfaceAddresses, logger: logger)
        }
        thread.name = "relayd-self-test"
        thread.start()
    }

    /// Tests every relay address and logs one line each: info when the listener answered,
    /// warning otherwise.
    static func run(configuration: RelayConfiguration, interfaceAddresses: [IPAddress], logger: Logger) {
        let results = SelfTest.run(configuration: configuration, interfaceAddresses: interfaceAddresses)
        if results.isEmpty {
            logger.warning("self-test: no relay address to test from", metadata: ["event": "self_test"])
        }
        for result in results {
            var metadata: Logger.Metadata = [
                "event": "self_test", "relay": "\(result.relay.bound)", "advertised": "\(result.relay.advertised)",
                "target": "\(result.target)",
            ]
            switch result.outcome {
            case .mapped(let seen): metadata["mapped"] = "\(seen)"
            case .noAnswer: metadata["result"] = "no answer"
            case .failed(let reason): metadata["result"] = "\(reason)"
            }
            logger.log(level: result.succeeded ? .info : .warning, "\(result.summary)", metadata: metadata)
        }
    }
}
