import Glibc

extension RedisSentinel {
    /// Where the master is now, by the first sentinel that knows `masterName` (blocking; each
    /// sentinel within `timeout`). A sentinel that is down, refuses, or does not monitor that name
    /// is skipped; when none answers, the error lists what each said (docs/cluster.md).
    func master(credentials endpoint: RedisEndpoint, timeout: timeval) throws(RedisBlockingClient.Failure) -> Address {
        var failures: [String] = []
        for address in sentinels {
            do {
                // The sentinels' own credentials, as a pair; else the master's, borrowed: a
                // sentinel that refuses those is asked without (it may have no password set).
                let own = user != nil || password != nil
                let asked = RedisEndpoint(
                    host: address.host, port: address.port, user: own ? user : endpoint.user,
                    password: own ? password : endpoint.password)
                let client = try RedisBlockingClient(direct: asked, timeout: timeout, authOptional: !own)
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

    /// Whether a `ROLE` reply rules the server out. `ROLE` is in Redis's `@admin` category: an
    /// ACL user without it gets `NOPERM`, and the server is taken as the sentinels named it (a
    /// demoted one still shows itself by `READONLY`).
    static func refusesRole(_ reply: RedisReply) -> Bool {
        if let message = reply.errorMessage { return !message.hasPrefix("NOPERM") }
        return !isMaster(reply)
    }
}
