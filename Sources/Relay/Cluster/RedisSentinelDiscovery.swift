import Glibc

extension RedisSentinel {
    /// Why a sentinel's answer was refused: written so a log line says what the operator must fix.
    static let noPasswordConfigured = "without any password configured"

    /// Where the master is now, by the first sentinel that knows `masterName` (blocking; each
    /// sentinel within `timeout`). A sentinel that is down, refuses, or does not monitor that name
    /// is skipped; when none answers, the error lists what each said (docs/cluster.md).
    func master(credentials endpoint: RedisEndpoint, timeout: timeval) throws(RedisBlockingClient.Failure) -> Address {
        var failures: [String] = []
        for address in sentinels {
            do {
                let asked = RedisEndpoint(
                    host: address.host, port: address.port, user: user ?? endpoint.user,
                    password: password ?? endpoint.password)
                // With the master's password borrowed, a sentinel without one is asked without.
                let client = try RedisBlockingClient(direct: asked, timeout: timeout, authOptional: password == nil)
                let reply = try client.command(
                    ["SENTINEL", "get-master-addr-by-name", masterName], what: "SENTINEL get-master-addr-by-name")
                if let master = Self.address(reply) { return master }
                failures.append("\(address) does not monitor '\(masterName)'")
            } catch {
                failures.append("\(address): \(error.description)")
            }
        }
        throw RedisBlockingClient.Failure(
            description: "no sentinel named the master '\(masterName)' (\(failures.joined(separator: "; ")))")
    }

    /// The reply to `SENTINEL get-master-addr-by-name`: `[host, port]`, or nil (unknown name, or
    /// anything malformed).
    static func address(_ reply: RedisReply) -> Address? {
        guard let fields = reply.elements, fields.count == 2, let host = fields[0].text, let portText = fields[1].text,
            let port = Int(portText), (1...65535).contains(port), !host.isEmpty, host.utf8.count <= 255,
            !host.contains(where: { $0 == " " || $0 == "/" || $0 == "@" || $0.isNewline })
        else { return nil }
        return Address(host: host, port: port)
    }

    /// Whether a `ROLE` reply is a master's (the first element is `master`): what a client checks
    /// once connected to the address the sentinels gave, in case that server was since demoted.
    static func isMaster(_ reply: RedisReply) -> Bool {
        reply.elements?.first?.text == "master"
    }
}
