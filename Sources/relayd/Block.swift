import ArgumentParser
import Foundation
import Relay

/// `relayd block USER --for 1h`, `relayd block --list`, `relayd unblock USER` (docs/admin.md).
struct Block: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Refuse a user's new allocations for a while (403), or list the blocks.",
        discussion: "Allocations the user holds go on; end them with `relayd kick --user`. Blocks survive SIGHUP, not a restart.")

    @OptionGroup var connection: AdminConnection

    @Argument(help: "The user id to block.")
    var user: String?

    @Option(name: .customLong("for"), help: "How long: 90s, 15m, 2h, 7d (at most a year).")
    var duration: String?

    @Flag(help: "List the users blocked now.")
    var list = false

    func validate() throws {
        if list {
            guard user == nil, duration == nil else { throw ValidationError("--list takes no user or --for") }
        } else {
            guard user != nil else { throw ValidationError("give a user to block, or --list") }
            guard let duration, AllocationPage.parseDuration(duration) != nil else {
                throw ValidationError("--for: expected a duration such as 90s, 15m, 2h or 7d")
            }
        }
    }

    func run() throws {
        if list {
            let body = try connection.call("block", "GET", APIRouter.blocksPath)
            struct Blocks: Decodable {
                struct Entry: Decodable {
                    var user: String
                    var until: Int
                    var set_by: String?
                    var set_at: Int?
                }
                var blocks: [Entry]
            }
            let blocks = (try? JSONDecoder().decode(Blocks.self, from: Data(body.utf8)))?.blocks ?? []
            let now = Int(Date().timeIntervalSince1970)
            let time = { (t: Int) in ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(t))) }
            print("USER  UNTIL  LEFT  SET BY  SET AT")
            for b in blocks {
                let left = AllocationPage.duration(max(0, b.until - now))
                print("\(b.user)  \(time(b.until))  \(left)  \(b.set_by ?? "-")  \(b.set_at.map(time) ?? "-")")
            }
            return
        }
        let seconds = AllocationPage.parseDuration(duration!)!
        _ = try connection.call(
            "block", "POST", "/api/v1/users/\(AdminConnection.encode(user!))/block", body: "{\"seconds\":\(seconds)}")
        print("blocked \(user!) for \(AllocationPage.duration(seconds))")
    }
}

/// `relayd unblock USER`: lifts a block before it lapses.
struct Unblock: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Lift a user's block before it lapses.")

    @OptionGroup var connection: AdminConnection

    @Argument(help: "The user id.")
    var user: String

    func run() throws {
        _ = try connection.call("unblock", "DELETE", "/api/v1/users/\(AdminConnection.encode(user))/block")
        print("unblocked \(user)")
    }
}
