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
        if let fleet = try connection.fleet() { return runFleet(fleet) }
        switch collect(FleetNode(name: "", client: try connection.client(), problem: nil)) {
        case .failure(let failure): connection.fail("sessions", failure.reason)
        case .success(let (items, raw)):
            if json {
                print(try Self.jsonArray(raw))
            } else {
                print(AllocationPage.table(items), terminator: "")
            }
        }
    }

    /// Every node of the cluster (docs/admin.md, "A fleet"): one listing with each allocation's
    /// node; a node that does not answer is named on standard error, and the exit status is 3.
    private func runFleet(_ fleet: [FleetNode]) {
        var items: [AllocationPage.Item] = []
        var names: [String] = []
        var objects: [Any] = []
        var failures: [FleetFailure] = []
        for node in fleet {
            switch collect(node) {
            case .success(let (some, pages)):
                items += some
                names += Array(repeating: node.name, count: some.count)
                for page in pages {
                    let object = (try? JSONSerialization.jsonObject(with: Data(page.utf8))) as? [String: Any]
                    for case var allocation as [String: Any] in object?["allocations"] as? [Any] ?? [] {
                        allocation["node"] = node.name
                        objects.append(allocation)
                    }
                }
            case .failure(let failure): failures.append(failure)
            }
        }
        if json {
            let data = (try? JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(AllocationPage.table(items, nodes: names), terminator: "")
        }
        FleetFailure.report(failures, command: "sessions")
    }

    /// One node's allocations, every page, and the pages as they came (each page must move the
    /// cursor forward, or a misbehaving server would keep us here).
    private func collect(_ node: FleetNode) -> Result<([AllocationPage.Item], [String]), FleetFailure> {
        var items: [AllocationPage.Item] = []
        var raw: [String] = []
        var cursor: String? = nil
        repeat {
            var query = ["limit=\(APIRouter.maxPageSize)"]
            if let user { query.append("user=\(AdminConnection.encode(user))") }
            if let cursor { query.append("cursor=\(cursor)") }
            switch node.call("GET", APIRouter.allocationsPath + "?" + query.joined(separator: "&")) {
            case .failure(let failure): return .failure(failure)
            case .success(let (status, body)):
                guard status == 200 else {
                    let message = (try? JSONDecoder().decode(AdminConnection.APIErrorBody.self, from: Data(body.utf8)))?.message
                    return .failure(FleetFailure(node: node.name, reason: "HTTP \(status): \(message ?? String(body.prefix(200)))"))
                }
                guard let page = try? AllocationPage.decode(body) else {
                    return .failure(
                        FleetFailure(node: node.name, reason: "the API answered something else than an allocation list"))
                }
                if let next = page.next_cursor, page.allocations.isEmpty || next <= (cursor ?? "") {
                    return .failure(FleetFailure(node: node.name, reason: "the API's cursor did not advance"))
                }
                items += page.allocations
                raw.append(body)
                cursor = page.next_cursor
            }
        } while cursor != nil
        return .success((items, raw))
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
