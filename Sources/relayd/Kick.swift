import ArgumentParser
import Foundation
import Relay

/// `relayd kick SESSION` or `relayd kick --user U`: ends allocations now (docs/admin.md).
struct Kick: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End allocations now: one by its session id, or all of a user's.",
        discussion: "The client's next Refresh fails (437). Combine with `relayd block` to keep the user out.")

    @OptionGroup var connection: AdminConnection

    @Argument(help: "The session id (16 hex digits, as `relayd sessions` and the logs show it).")
    var session: String?

    @Option(help: "End every allocation of this user instead.")
    var user: String?

    func validate() throws {
        guard (session == nil) != (user == nil) else { throw ValidationError("give a session id or --user, not both") }
    }

    struct Answer: Decodable { var terminated: Int }

    func run() throws {
        let path =
            session.map { "\(APIRouter.allocationsPath)/\(AdminConnection.encode($0))" }
            ?? "\(APIRouter.allocationsPath)?user=\(AdminConnection.encode(user!))"
        if let fleet = try connection.fleet() { return runFleet(fleet, path: path) }
        let body = try connection.call("kick", "DELETE", path)
        let count = (try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)))?.terminated ?? 0
        print("terminated \(count) allocation\(count == 1 ? "" : "s")")
    }

    /// Every node of the cluster (docs/admin.md, "A fleet"): the count per node and in all; a
    /// session lives on one node, so the others answer 404, which is no failure.
    private func runFleet(_ fleet: [FleetNode], path: String) {
        var total = 0
        var parts: [String] = []
        var failures: [FleetFailure] = []
        for node in fleet {
            switch node.call("DELETE", path) {
            case .failure(let failure): failures.append(failure)
            case .success(let (status, body)):
                if status == 404 && session != nil {
                    parts.append("\(node.name) 0")
                } else if (200..<300).contains(status),
                    let count = (try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)))?.terminated
                {
                    total += count
                    parts.append("\(node.name) \(count)")
                } else {
                    failures.append(FleetFailure(node: node.name, reason: "HTTP \(status): \(body.prefix(200))"))
                }
            }
        }
        if let session, total == 0, failures.isEmpty {
            connection.fail("kick", "no node has session \(session)")
        }
        print("terminated \(total) allocation\(total == 1 ? "" : "s") (\(parts.joined(separator: ", ")))")
        FleetFailure.report(failures, command: "kick")
    }
}
