import Foundation
import Relay

/// One node of the cluster a fleet command acts on (docs/admin.md, "A fleet"): its name, and a
/// client for its admin API, or why there is none.
struct FleetNode {
    let name: String
    let client: APIClient?
    let problem: String?

    /// One request to this node: its body on a 2xx answer, or what went wrong.
    func call(_ method: String, _ path: String) -> Result<(status: Int, body: String), FleetFailure> {
        guard let client else { return .failure(FleetFailure(node: name, reason: problem ?? "unreachable")) }
        do {
            let response = try client.send(method, path)
            return .success((response.status, response.body))
        } catch {
            return .failure(FleetFailure(node: name, reason: error.description))
        }
    }
}

/// A node a fleet command could not ask: printed, never left out.
struct FleetFailure: Error {
    let node: String
    let reason: String

    var line: String { "node \(node) did not answer: \(reason)" }

    /// Every failure on standard error; exit status 3 when there was one (the output printed is
    /// then the other nodes' only).
    static func report(_ failures: [FleetFailure], command: String) {
        for failure in failures {
            FileHandle.standardError.write(Data("relayd \(command): \(failure.line)\n".utf8))
        }
        if !failures.isEmpty { Foundation.exit(3) }
    }
}
