import Glibc
import StunCodec

/// kernel-loadgen's command line. See `usage`.
struct LoadgenOptions {
    enum Side: String { case client, peer }

    var objectPath = ".build/bpf/relayd_loadgen.bpf.o"
    var interface = ""
    var anchor = ""
    var gatewayMAC: [UInt8] = []
    var flowsPath = ""
    var side = Side.client
    var server: TransportAddress?
    var payloadSize = 100
    var rate = 10_000.0
    var duration = 2.0
    /// CLOCK_REALTIME nanoseconds to start sending at (so that the two sides start together);
    /// 0: now.
    var startAt: UInt64 = 0
    var grace = 0.5
    var label = ""

    static let usage = """
        usage: kernel-loadgen --interface IF --anchor IF --gateway-mac MAC --flows FILE --side client|peer [options]
          --object PATH        the generator's BPF object (default .build/bpf/relayd_loadgen.bpf.o)
          --interface IF       send out of IF, and count what arrives on it (the sink, XDP)
          --anchor IF          an unused interface (veth) to keep the generator attached to
          --gateway-mac MAC    the next hop's link-layer address (the relay host's end of the link)
          --flows FILE         the flows relay-bench --flows-file wrote
          --side client|peer   client: ChannelData (raw UDP without a relay) from each flow's client
                               address to --server; peer: raw UDP from the peer to each relayed address
          --server IP:PORT     the relay's listening address (client side, with a relay)
          --payload BYTES      application payload per packet, >= 32 (default 100)
          --rate PPS           packets per second, all flows together (default 10000)
          --duration S         seconds of sending (default 2)
          --start-at NS        CLOCK_REALTIME nanoseconds to start at (default: now)
          --grace S            wait after the last send before reading the sink (default 0.5)
          --label TEXT         copied into the JSON line
        Needs root. Output: one JSON line.
        """

    static func parse(_ arguments: [String]) throws(LoadgenError) -> LoadgenOptions {
        var o = LoadgenOptions()
        var it = arguments.makeIterator()
        func value(_ name: String) throws(LoadgenError) -> String {
            guard let v = it.next() else { throw LoadgenError("\(name) needs a value") }
            return v
        }
        func number(_ name: String) throws(LoadgenError) -> Double {
            let text = try value(name)
            guard let v = Double(text), v >= 0 else { throw LoadgenError("\(name): \(text) is not a number") }
            return v
        }
        while let arg = it.next() {
            switch arg {
            case "--object": o.objectPath = try value(arg)
            case "--interface": o.interface = try value(arg)
            case "--anchor": o.anchor = try value(arg)
            case "--gateway-mac":
                let text = try value(arg)
                let bytes = text.split(separator: ":").compactMap { UInt8($0, radix: 16) }
                guard bytes.count == 6 else { throw LoadgenError("--gateway-mac: \(text)?") }
                o.gatewayMAC = bytes
            case "--flows": o.flowsPath = try value(arg)
            case "--side":
                let text = try value(arg)
                guard let side = Side(rawValue: text) else { throw LoadgenError("--side: \(text)?") }
                o.side = side
            case "--server":
                let text = try value(arg)
                guard let address = TransportAddress(text), address.ip.family == .ipv4 else {
                    throw LoadgenError("--server: \(text)? (IPv4 IP:PORT)")
                }
                o.server = address
            case "--payload": o.payloadSize = Int(try number(arg))
            case "--rate": o.rate = try number(arg)
            case "--duration": o.duration = try number(arg)
            case "--start-at": o.startAt = UInt64(try number(arg))
            case "--grace": o.grace = try number(arg)
            case "--label": o.label = try value(arg)
            case "-h", "--help": throw LoadgenError(usage, isHelp: true)
            default: throw LoadgenError("unknown option \(arg)\n\(usage)")
            }
        }
        guard !o.interface.isEmpty, !o.anchor.isEmpty, !o.gatewayMAC.isEmpty, !o.flowsPath.isEmpty else {
            throw LoadgenError("--interface, --anchor, --gateway-mac and --flows are required\n\(usage)")
        }
        guard o.payloadSize >= 32, o.payloadSize <= 1400 else {
            throw LoadgenError("--payload must be within 32...1400")
        }
        guard o.rate > 0, o.duration > 0 else { throw LoadgenError("--rate and --duration must be positive") }
        return o
    }
}

/// A command-line or set-up problem (or the help text).
struct LoadgenError: Error {
    let message: String
    let isHelp: Bool
    init(_ message: String, isHelp: Bool = false) {
        self.message = message
        self.isHelp = isHelp
    }
}
