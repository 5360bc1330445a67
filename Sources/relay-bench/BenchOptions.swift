import StunCodec

/// relay-bench's command line.
struct BenchOptions {
    enum Pattern: String { case clientToClient = "client-to-client", externalPeer = "external-peer" }
    enum Transport: String { case udp, tcp, tls }

    var server = TransportAddress(ip: IPAddress(ipv4: 0x7F00_0001), port: 3478)
    var secret = ""
    /// With `--long-term-password`: client i is the long-term user `bench<i>` with this password.
    var longTermPassword = ""
    var realm = ""
    var pairs = 50
    var payloadSize = 100
    var rate = 10_000.0
    var duration = 5.0
    var warmup = 1.0
    var pattern = Pattern.clientToClient
    var sendIndications = false
    /// The baseline without a relay: each client sends straight to its far end (the echo peer,
    /// or its partner's socket), raw payloads, no allocations.
    var direct = false
    /// Where the clients' sockets are bound (default: the server's address) and where the echo
    /// peer listens (default: the server's address), and the network namespace to open the echo
    /// peer's socket in (a name under /run/netns).
    var clientIP: IPAddress?
    var peerIP: IPAddress?
    var peerNamespace = ""
    /// The second client of each pair on another host: its socket bound to `partnerIP`, opened
    /// inside `partnerNamespace` (client-to-client).
    var partnerIP: IPAddress?
    var partnerNamespace = ""
    var idleAllocations = 0
    var hold = 10.0
    var setupOnly = false
    var allocations = 0
    var window = 64
    var lifetime: UInt32 = 600
    var serverPID: Int32 = 0
    var readyFile = ""
    /// Where `--flows-file` writes the set-up flows for the kernel load generator.
    var flowsFile = ""
    var transport = Transport.udp
    var drainMs = 300
    var label = ""
    /// `--handshakes S`: TLS handshakes for S seconds instead of TURN (`HandshakeBench`).
    var handshakeSeconds = 0.0
    var concurrency = 16
    var resume = false
    var tls12 = false

    static let usage = """
        usage: relay-bench --server IP:PORT (--secret SECRET | --long-term-password PW) [options]
          --pattern client-to-client|external-peer   traffic pattern (default client-to-client)
          --pairs N            client pairs, each client with its own socket (default 50)
          --payload BYTES      application payload per packet, >= 32 (default 100)
          --rate PPS           messages per second, all clients together (default 10000)
          --duration S         measured seconds (default 5); --warmup S before it (default 1)
          --long-term-password PW  client i authenticates as the long-term user bench<i> with
                               password PW (a user database's users, docs/userdb.md) instead of
                               REST credentials under --secret
          --send-indications   Send/Data indications instead of ChannelData
          --direct             baseline without a relay: the same traffic straight between the
                               endpoints (raw UDP; --server then only names the address family)
          --client-ip IP       bind the clients to IP (default: the server's IP)
          --peer-ip IP         the echo peer's address (default: the server's IP)
          --peer-netns NAME    open the echo peer's socket in network namespace NAME (/run/netns)
          --partner-ip IP      bind the second client of each pair to IP ...
          --partner-netns NAME ... in network namespace NAME (client-to-client across two hosts)
          --setup-only         only measure allocation setup rate (401 + authenticated Allocate)
          --allocations N      allocations for --setup-only (default 2 x pairs)
          --idle-allocations N create N allocations, refresh them once, hold them --hold S (default 10)
          --ready-file PATH    written once the idle allocations are all up
          --flows-file PATH    external peer: set up the clients, write their flows to PATH for
                               kernel-loadgen, hold them --hold S without sending (no data phase)
          --window N           TURN transactions in flight during setup (default 64)
          --lifetime S         requested allocation lifetime (default 600)
          --server-pid PID     sample this process's CPU over the measurement window
          --realm REALM        expected realm (informational; the 401's realm is used)
          --transport udp|tcp|tls  client transport; with tcp or tls, --server is the TCP or TLS
                               port and each client has its own connection (single-threaded
                               send/receive loop)
          --drain-ms MS        wait after the last send before counting (default 300)
          --handshakes S       TLS handshakes only, for S seconds, against --server (a TLS port):
                               --concurrency N at a time (default 16), each closed once done;
                               --resume offers the session of a first full handshake (TLS 1.3
                               PSK, or with --tls12 a TLS 1.2 ticket) and counts resumptions
          --label TEXT         copied into the JSON line
        Output: one JSON line (starts with '{') and one human-readable line.
        """

    /// Parses `arguments` (without the program name); throws a message on bad input.
    static func parse(_ arguments: [String]) throws(OptionError) -> BenchOptions {
        var o = BenchOptions()
        var it = arguments.makeIterator()
        func value(_ name: String) throws(OptionError) -> String {
            guard let v = it.next() else { throw OptionError("\(name) needs a value") }
            return v
        }
        func address(_ name: String) throws(OptionError) -> IPAddress {
            let text = try value(name)
            guard let ip = IPAddress(text), ip.family == .ipv4 else { throw OptionError("\(name): not an IPv4 address: \(text)") }
            return ip
        }
        func number(_ name: String) throws(OptionError) -> Double {
            let text = try value(name)
            guard let v = Double(text), v >= 0 else { throw OptionError("\(name): not a number: \(text)") }
            return v
        }
        while let raw = it.next() {
            // Accept --key=value as well as --key value.
            var arg = raw
            if raw.hasPrefix("--"), let eq = raw.firstIndex(of: "=") {
                arg = String(raw[..<eq])
                var rest = [String(raw[raw.index(after: eq)...])]
                rest.append(contentsOf: Array(IteratorSequence(it)))
                it = rest.makeIterator()
            }
            switch arg {
            case "--server":
                let text = try value(arg)
                guard let a = TransportAddress(text), a.ip.family == .ipv4 else {
                    throw OptionError("--server: want IPv4:PORT, got \(text)")
                }
                o.server = a
            case "--secret": o.secret = try value(arg)
            case "--long-term-password": o.longTermPassword = try value(arg)
            case "--realm": o.realm = try value(arg)
            case "--pairs": o.pairs = Int(try number(arg))
            case "--payload": o.payloadSize = Int(try number(arg))
            case "--rate": o.rate = try number(arg)
            case "--duration": o.duration = try number(arg)
            case "--warmup": o.warmup = try number(arg)
            case "--pattern":
                let text = try value(arg)
                guard let p = Pattern(rawValue: text) else { throw OptionError("--pattern: \(text)?") }
                o.pattern = p
            case "--send-indications": o.sendIndications = true
            case "--direct": o.direct = true
            case "--client-ip": o.clientIP = try address(arg)
            case "--peer-ip": o.peerIP = try address(arg)
            case "--peer-netns": o.peerNamespace = try value(arg)
            case "--partner-ip": o.partnerIP = try address(arg)
            case "--partner-netns": o.partnerNamespace = try value(arg)
            case "--idle-allocations": o.idleAllocations = Int(try number(arg))
            case "--hold": o.hold = try number(arg)
            case "--setup-only": o.setupOnly = true
            case "--allocations": o.allocations = Int(try number(arg))
            case "--window": o.window = max(1, Int(try number(arg)))
            case "--lifetime": o.lifetime = UInt32(try number(arg))
            case "--server-pid": o.serverPID = Int32(try number(arg))
            case "--ready-file": o.readyFile = try value(arg)
            case "--flows-file": o.flowsFile = try value(arg)
            case "--transport":
                let text = try value(arg)
                guard let t = Transport(rawValue: text) else { throw OptionError("--transport: \(text)?") }
                o.transport = t
            case "--drain-ms": o.drainMs = Int(try number(arg))
            case "--label": o.label = try value(arg)
            case "--handshakes": o.handshakeSeconds = try number(arg)
            case "--concurrency": o.concurrency = max(1, Int(try number(arg)))
            case "--resume": o.resume = true
            case "--tls12": o.tls12 = true
            case "-h", "--help": throw OptionError(usage, isHelp: true)
            default: throw OptionError("unknown option \(raw)\n\(usage)")
            }
        }
        guard !o.secret.isEmpty || !o.longTermPassword.isEmpty || o.handshakeSeconds > 0 else {
            throw OptionError("--secret or --long-term-password is required\n\(usage)")
        }
        guard o.payloadSize >= PayloadFormat.minimumSize, o.payloadSize <= 1400 else {
            throw OptionError("--payload must be within \(PayloadFormat.minimumSize)...1400")
        }
        guard o.pairs >= 1, o.rate > 0 else { throw OptionError("--pairs and --rate must be positive") }
        if o.allocations == 0 { o.allocations = 2 * o.pairs }
        if o.direct && (o.transport != .udp || o.sendIndications) {
            throw OptionError("--direct sends raw UDP: not with --transport tcp or tls or --send-indications")
        }
        if !o.flowsFile.isEmpty && (o.pattern != .externalPeer || o.transport != .udp) {
            throw OptionError("--flows-file is for --pattern external-peer over UDP")
        }
        return o
    }
}

/// A command-line problem (or the help text).
struct OptionError: Error {
    let message: String
    let isHelp: Bool
    init(_ message: String, isHelp: Bool = false) {
        self.message = message
        self.isHelp = isHelp
    }
}

extension BenchOptions {
    /// Client `client`'s credentials: the long-term user bench<client>, or REST credentials.
    func credentials(client: Int, validForSeconds: Int) -> ClientCredentials {
        if !longTermPassword.isEmpty { return ClientCredentials(username: "bench\(client)", password: longTermPassword) }
        return ClientCredentials(secret: secret, user: "bench\(client)", validForSeconds: validForSeconds)
    }
}
