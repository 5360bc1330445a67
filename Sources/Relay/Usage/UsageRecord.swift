import Foundation
import RelayCore

/// One fact of usage accounting (docs/usage.md), as a process saw it: an allocation made, or what
/// an allocation relayed and how long it held its relayed address in this process. An
/// allocation that moves to another process in a live upgrade leaves a record in each, and
/// only the last one is `final`; the sums are the allocation's whole.
public struct UsageRecord: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// An Allocate was granted (RFC 8656 §7.2): one allocation made.
        case made = "start"
        /// The allocation ended in this process (or was handed over): its traffic and seconds here.
        case ended = "end"
    }

    public var kind: Kind
    /// Unix seconds: when it was made, or ended here.
    public var time: Int64
    /// The tenant's name; empty for the default tenant.
    public var tenant: String
    /// The user id within the tenant (no `<tenant>/` prefix).
    public var user: String
    public var session: String
    /// `.ended`: what it relayed in this process, in the core, the kernel fast path and its pipes.
    public var traffic = TrafficCounters()
    /// `.ended`: seconds it held its relayed address in this process.
    public var seconds: Int64 = 0
    /// `.ended`: it ended for good here (not handed over to another process).
    public var final = false

    public init(kind: Kind, time: Int64, tenant: String, user: String, session: String) {
        self.kind = kind
        self.time = time
        self.tenant = tenant
        self.user = user
        self.session = session
    }

    /// `user` without its tenant's `<tenant>/` prefix (`Tenant.quotaUser`).
    static func plainUser(_ user: String, tenant: String) -> String {
        guard !tenant.isEmpty, user.hasPrefix(tenant + "/") else { return user }
        return String(user.dropFirst(tenant.utf8.count + 1))
    }

    /// The record as one line of the usage journal and the Redis stream's fields (docs/usage.md).
    var fields: [(String, String)] {
        var f: [(String, String)] = [
            ("v", "1"), ("kind", kind.rawValue), ("time", String(time)), ("tenant", tenant), ("user", user),
            ("session", session),
        ]
        if kind == .ended {
            f += [
                ("final", final ? "1" : "0"), ("seconds", String(seconds)),
                ("packets_to_peer", String(traffic.packetsToPeer)), ("bytes_to_peer", String(traffic.bytesToPeer)),
                ("packets_to_client", String(traffic.packetsToClient)),
                ("bytes_to_client", String(traffic.bytesToClient)),
            ]
        }
        return f
    }

    /// One JSON object per line, every value a string (the stream's form).
    var line: String {
        var w = JSONWriter()
        w.object { o in for (key, value) in fields { o.field(key, value) } }
        return w.text + "\n"
    }

    /// The record a journal line holds; nil for anything else (counted by the reader, never
    /// trusted further: every number is range-checked).
    init?(line: Substring) {
        guard let data = line.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: String],
            object["v"] == "1", let kind = object["kind"].flatMap(Kind.init(rawValue:)),
            let time = object["time"].flatMap({ Int64($0) }), time >= 0,
            let tenant = object["tenant"], tenant.utf8.count <= 32, let user = object["user"], user.utf8.count <= 1024,
            let session = object["session"], session.utf8.count <= 64
        else { return nil }
        self.init(kind: kind, time: time, tenant: tenant, user: user, session: session)
        guard kind == .ended else { return }
        func count(_ key: String) -> UInt64? { object[key].flatMap { UInt64($0) } }
        guard let seconds = object["seconds"].flatMap({ Int64($0) }), seconds >= 0, let final = object["final"],
            let pp = count("packets_to_peer"), let bp = count("bytes_to_peer"), let pc = count("packets_to_client"),
            let bc = count("bytes_to_client")
        else { return nil }
        self.seconds = seconds
        self.final = final == "1"
        traffic = TrafficCounters(packetsToPeer: pp, bytesToPeer: bp, packetsToClient: pc, bytesToClient: bc)
    }
}
