import ArgumentParser
import Foundation
import Relay

/// `relayd sessions [--user U] [--json]`: the live allocations of a running relayd (docs/admin.md).
struct Sessions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the live allocations of a running relayd (a table, or JSON with --json).",
        discussion: "Asks the admin API (GET /api/v1/allocations), following its cursor to the end.")

    @OptionGroup var connection: AdminConnection

    @Option(help: "Only this user's allocations (the user id: the part after the REST separator).")
    var user: String?

    @Flag(help: "Print the API's JSON allocation objects, as one array.")
    var json = false

    func run() throws {
        var items: [AllocationPage.Item] = []
        var raw: [String] = []
        var cursor: String? = nil
        repeat {
            var query = ["limit=\(APIRouter.maxPageSize)"]
            if let user { query.append("user=\(AdminConnection.encode(user))") }
            if let cursor { query.append("cursor=\(cursor)") }
            let body = try connection.call(
                "sessions", "GET", APIRouter.allocationsPath + "?" + query.joined(separator: "&"))
            guard let page = try? AllocationPage.decode(body) else {
                connection.fail("sessions", "the API answered something else than an allocation list")
            }
            items += page.allocations
            raw.append(body)
            // Each page must move forward, or a misbehaving server would keep us here.
            if let next = page.next_cursor, page.allocations.isEmpty || next <= (cursor ?? "") {
                connection.fail("sessions", "the API's cursor did not advance")
            }
            cursor = page.next_cursor
        } while cursor != nil
        if json {
            print(try Self.jsonArray(raw))
        } else {
            print(AllocationPage.table(items), terminator: "")
        }
    }

    /// The `allocations` arrays of every page, joined.
    static func jsonArray(_ pages: [String]) throws -> String {
        var all: [Any] = []
        for page in pages {
            let object = try JSONSerialization.jsonObject(with: Data(page.utf8)) as? [String: Any]
            all += object?["allocations"] as? [Any] ?? []
        }
        let data = try JSONSerialization.data(withJSONObject: all, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

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
                }
                var blocks: [Entry]
            }
            let blocks = (try? JSONDecoder().decode(Blocks.self, from: Data(body.utf8)))?.blocks ?? []
            let now = Int(Date().timeIntervalSince1970)
            print("USER  UNTIL  LEFT")
            for b in blocks {
                let until = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(b.until)))
                print("\(b.user)  \(until)  \(AllocationPage.duration(max(0, b.until - now)))")
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
