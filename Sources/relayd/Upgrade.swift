import ArgumentParser
import Foundation
import Relay

/// `relayd upgrade`: a live upgrade through the admin API (docs/live-upgrade.md), the same as
/// SIGUSR2, but it waits and says how it went.
struct Upgrade: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start the relayd binary again and hand it the running node's sockets and allocations.",
        discussion: """
            The running relayd starts its binary from the same path with the same arguments, hands \
            it the listeners, the UDP allocations, the TCP connections, the TLS 1.3 sessions whose records \
            relayd keeps, and the keys, and drains the clients that cannot move (TLS sessions OpenSSL keeps: TLS 1.2 or tls-openssl-records; DTLS). Exits 0 once \
            the new process serves, 1 if the upgrade failed (the running relayd then serves on).
            """)

    @OptionGroup var connection: AdminConnection

    func run() throws {
        let body = try connection.call("upgrade", "POST", APIRouter.upgradePath, timeoutSeconds: 120)
        struct Answer: Decodable {
            var pid: Int
            var allocations: Int
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)) else {
            connection.fail("upgrade", "unexpected answer: \(body)")
        }
        print("upgraded: pid \(answer.pid) serves now; \(answer.allocations) allocations moved")
    }
}
