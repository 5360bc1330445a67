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

    func run() throws {
        let path =
            session.map { "\(APIRouter.allocationsPath)/\(AdminConnection.encode($0))" }
            ?? "\(APIRouter.allocationsPath)?user=\(AdminConnection.encode(user!))"
        let body = try connection.call("kick", "DELETE", path)
        struct Answer: Decodable { var terminated: Int }
        let count = (try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)))?.terminated ?? 0
        print("terminated \(count) allocation\(count == 1 ? "" : "s")")
    }
}
