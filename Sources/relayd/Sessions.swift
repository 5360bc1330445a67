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
