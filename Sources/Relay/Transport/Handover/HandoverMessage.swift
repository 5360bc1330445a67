import RelayCore
import StunCodec

/// A descriptor the running relayd hands its heir in a live upgrade (docs/live-upgrade.md),
/// named by what it is, so the heir can use it where it would have opened its own.
struct HandoverSocket: Sendable, Equatable {
    enum Kind: UInt8, Sendable {
        /// Loop `loop`'s member of the SO_REUSEPORT group on `address` (UDP, DTLS, TCP, TLS).
        case udpListener = 1
        case dtlsListener = 2
        case tcpListener = 3
        case tlsListener = 4
        /// The HTTP API's (or the Prometheus endpoint's) listening socket on `address`.
        case httpListener = 5
        /// The relay socket of the UDP allocation `session`, bound to `address` (RFC 8656 §7.2):
        /// its first relayed address, or a dual allocation's second one (§7.2 step 9).
        case relayMain = 6
        case relayAdditional = 7
        /// A TCP or TLS client's connection, named by `session` (its `HandoverStream.id`) and its
        /// client's address; what it had queued goes in a `stream` message.
        case tcpClient = 8
        /// The kernel fast path (docs/kernel-fast-path.md): one of its shared maps (`session` is
        /// its index in `KernelFastPath.sharedMaps`), and its tcx and XDP links (`session` is the
        /// interface index).
        case bpfMap = 9
        case bpfLink = 10
        case bpfXDPLink = 11
        /// A moved mobile client's connected socket (RFC 8016, docs/mobility.md): `session` is
        /// its allocation's, `address` the client's.
        case steered = 12
        /// An RFC 6062 peer connection (docs/tcp-relay.md) whose connect is in progress or that
        /// waits for its ConnectionBind: `session` is its CONNECTION-ID, `address` the peer's.
        case peerConnection = 13
        /// The two sockets of an RFC 6062 pipe: its data connection (`address` is the client's)
        /// and its peer connection (`address` is the peer's); `session` is the CONNECTION-ID.
        case pipeClient = 14
        case pipePeer = 15
    }

    /// The address of a socket that has none (the fast path's descriptors).
    static let noAddress = TransportAddress(ip: IPAddress("0.0.0.0")!, port: 0)

    var kind: Kind
    var loop: UInt16 = 0
    var session: UInt64 = 0
    var address: TransportAddress
}

/// The per-source limiters of docs/rate-limits.md, as the handover names them.
enum HandoverLimiter: UInt8, Sendable, CaseIterable {
    case challenges = 1, failures, allocations

    func of(_ limits: SourceLimits) -> SourceRateLimiter {
        switch self {
        case .challenges: return limits.challenges
        case .failures: return limits.failures
        case .allocations: return limits.allocations
        }
    }
}

/// One source's bucket in a per-source limiter: its tokens, in thousandths.
struct HandoverLimiterEntry: Sendable, Equatable {
    var source: IPAddress
    var milliTokens: UInt32

    init(source: IPAddress, milliTokens: UInt32) {
        self.source = source
        self.milliTokens = milliTokens
    }

    init(source: IPAddress, tokens: Double) {
        self.source = source
        milliTokens = UInt32(min(max(tokens, 0) * 1000, Double(UInt32.max)).rounded(.down))
    }

    var tokens: Double { Double(milliTokens) / 1000 }
}

/// One message of the handover protocol, on a SOCK_SEQPACKET socket pair between the running
/// relayd and the heir it started (docs/live-upgrade.md, "Protocol"). Big-endian fields.
enum HandoverMessage: Sendable, Equatable {
    /// Heir → running: the heir has read its configuration and waits for what it inherits.
    case hello(version: UInt32, pid: Int32)
    /// Running → heir: what the descriptors attached to this message are, in order (at most
    /// `HandoverChannel.maxDescriptors`).
    case sockets([HandoverSocket])
    /// Running → heir: a piece of the state snapshot (a compacted state journal,
    /// docs/state-journal.md), in order.
    case state([UInt8])
    /// Running → heir: users the admin API blocked (docs/admin.md), some of them.
    case blocks([UserBlocklist.Entry])
    /// Running → heir: a piece of its `/metrics` page, in order, whose counters the heir goes on
    /// from (`CarriedCounters`). Sent to heirs of version 2 and later only.
    case counters([UInt8])
    /// Running → heir: a TCP or TLS client's connection state; its socket went in `sockets`, as
    /// kind `tcpClient`. Sent to heirs of version 2 and later only; one with a TLS session
    /// (its own tag, `tlsStream`), to heirs of version 4 and later only.
    case stream(HandoverStream)
    /// Running → heir: a TCP allocation's RFC 6062 state (its allocation is in the snapshot).
    /// Sent to heirs of version 3 and later only.
    case tcpRelay(TCPRelaySnapshot)
    /// Running → heir: a piece of an RFC 6062 pipe's state; its sockets went in `sockets`.
    /// Sent to heirs of version 3 and later only.
    case pipe(HandoverPipe)
    /// Running → heir: some sources whose per-source limiter bucket is not full
    /// (docs/rate-limits.md): which limiter, and each source's tokens in thousandths. Sent to
    /// heirs of version 3 and later only.
    case limiters(HandoverLimiter, [HandoverLimiterEntry])
    /// Running → heir: all sent; the totals let the heir see that nothing was lost.
    case done(sockets: UInt32, stateBytes: UInt32, blocks: UInt32)
    /// Heir → running: every loop serves; the running relayd lets go.
    case ready(pid: Int32)
    /// Heir → running: the heir gives up (it exits); the running relayd serves on.
    case failed(String)

    /// The protocol's version. A running relayd hands over to an heir of any version from
    /// `oldestVersion` to its own, sending only what that version reads (a downgrade works);
    /// an heir of a later version than its own is refused.
    static let version: UInt32 = 4
    static let oldestVersion: UInt32 = 1
    /// What a running relayd that does not name its version in the heir's environment
    /// (`HandoverChannel.versionKey`, named since version 4) speaks at most: the version it
    /// refuses every later one above.
    static let unnamedPredecessorVersion: UInt32 = 3

    /// The version an heir says hello with: its own, or the running relayd's when that is older
    /// (named in the environment as `predecessor`; 3 when it is not), so an upgrade to a newer
    /// protocol works, the running relayd sending what it knows and the heir reading it.
    static func helloVersion(predecessor: String?) -> UInt32 {
        guard let predecessor, let named = UInt32(predecessor), named >= oldestVersion else {
            return min(version, unnamedPredecessorVersion)
        }
        return min(version, named)
    }
    /// The most bytes of `counters` an heir takes.
    static let maxCounterPage = 1 << 20
    /// The largest message: a state piece of 60 KiB fits a default unix socket buffer.
    static let maxBytes = 64 * 1024
    static let maxStatePiece = 60 * 1024
    /// A blocked user's name is 256 bytes at most (the admin API's limit); 200 blocks fit a message.
    static let maxBlockUserBytes = 256
    static let blocksPerMessage = 200
    /// A source takes at most 22 bytes: 2,000 fit a message.
    static let limiterEntriesPerMessage = 2000

    enum Tag: UInt8 {
        case hello = 1, sockets, state, done, ready, failed, blocks, counters, stream, tcpRelay, pipe, limiters, tlsStream
    }

    struct DecodingError: Error, CustomStringConvertible {
        let description: String
    }

    func encoded() -> [UInt8] {
        var out = HandoverOutput()
        switch self {
        case .hello(let version, let pid):
            out.u8(Tag.hello.rawValue)
            out.u32(version)
            out.u32(UInt32(bitPattern: pid))
        case .sockets(let sockets):
            out.u8(Tag.sockets.rawValue)
            out.u16(UInt16(sockets.count))
            for socket in sockets {
                out.u8(socket.kind.rawValue)
                out.u16(socket.loop)
                out.u64(socket.session)
                out.address(socket.address)
            }
        case .state(let bytes):
            out.u8(Tag.state.rawValue)
            out.bytes.append(contentsOf: bytes)
        case .counters(let bytes):
            out.u8(Tag.counters.rawValue)
            out.bytes.append(contentsOf: bytes)
        case .stream(let stream):
            // Room for the largest message at once: a TLS session's secrets are written into
            // this buffer only, never into one it outgrew (HandoverChannel.send wipes it).
            out.bytes.reserveCapacity(HandoverMessage.maxBytes)
            out.u8(stream.tls == nil ? Tag.stream.rawValue : Tag.tlsStream.rawValue)
            stream.encode(into: &out)
        case .tcpRelay(let snapshot):
            out.u8(Tag.tcpRelay.rawValue)
            snapshot.encode(into: &out)
        case .pipe(let pipe):
            out.u8(Tag.pipe.rawValue)
            pipe.encode(into: &out)
        case .limiters(let limiter, let entries):
            out.u8(Tag.limiters.rawValue)
            out.u8(limiter.rawValue)
            out.u16(UInt16(entries.count))
            for entry in entries {
                out.address(TransportAddress(ip: entry.source, port: 0))
                out.u32(entry.milliTokens)
            }
        case .blocks(let entries):
            out.u8(Tag.blocks.rawValue)
            out.u16(UInt16(entries.count))
            for entry in entries {
                let user = Array(entry.user.utf8.prefix(Self.maxBlockUserBytes))
                out.u16(UInt16(user.count))
                out.bytes.append(contentsOf: user)
                out.u64(UInt64(bitPattern: entry.until))
            }
        case .done(let sockets, let stateBytes, let blocks):
            out.u8(Tag.done.rawValue)
            out.u32(sockets)
            out.u32(stateBytes)
            out.u32(blocks)
        case .ready(let pid):
            out.u8(Tag.ready.rawValue)
            out.u32(UInt32(bitPattern: pid))
        case .failed(let reason):
            out.u8(Tag.failed.rawValue)
            out.bytes.append(contentsOf: reason.utf8.prefix(1024))
        }
        return out.bytes
    }

    /// Reads one message; anything short, long, or of an unknown tag or kind is refused.
    init(decoding bytes: UnsafeRawBufferPointer) throws(DecodingError) {
        var input = HandoverInput(bytes)
        guard let tag = Tag(rawValue: try input.u8()) else { throw DecodingError(description: "unknown message") }
        switch tag {
        case .hello:
            self = .hello(version: try input.u32(), pid: Int32(bitPattern: try input.u32()))
        case .sockets:
            let count = Int(try input.u16())
            guard count <= HandoverChannel.maxDescriptors else { throw DecodingError(description: "too many sockets") }
            var sockets: [HandoverSocket] = []
            sockets.reserveCapacity(count)
            for _ in 0..<count {
                guard let kind = HandoverSocket.Kind(rawValue: try input.u8()) else {
                    throw DecodingError(description: "unknown socket kind")
                }
                let loop = try input.u16()
                let session = try input.u64()
                sockets.append(HandoverSocket(kind: kind, loop: loop, session: session, address: try input.address()))
            }
            self = .sockets(sockets)
        case .state:
            self = .state(input.rest())
        case .counters:
            self = .counters(input.rest())
        case .stream, .tlsStream:
            self = .stream(try HandoverStream(decoding: &input, tls: tag == .tlsStream))
        case .tcpRelay:
            self = .tcpRelay(try TCPRelaySnapshot(decoding: &input))
        case .pipe:
            self = .pipe(try HandoverPipe(decoding: &input))
        case .limiters:
            guard let limiter = HandoverLimiter(rawValue: try input.u8()) else {
                throw DecodingError(description: "unknown limiter")
            }
            let count = Int(try input.u16())
            guard count <= Self.limiterEntriesPerMessage else { throw DecodingError(description: "too many limiter entries") }
            var entries: [HandoverLimiterEntry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let source = try input.address()
                guard source.port == 0 else { throw DecodingError(description: "bad limiter source") }
                entries.append(HandoverLimiterEntry(source: source.ip, milliTokens: try input.u32()))
            }
            self = .limiters(limiter, entries)
        case .blocks:
            let count = Int(try input.u16())
            guard count <= Self.blocksPerMessage else { throw DecodingError(description: "too many blocks") }
            var entries: [UserBlocklist.Entry] = []
            for _ in 0..<count {
                let length = Int(try input.u16())
                guard (1...Self.maxBlockUserBytes).contains(length) else { throw DecodingError(description: "bad user") }
                let user = String(decoding: try input.bytes(length), as: UTF8.self)
                entries.append(UserBlocklist.Entry(user: user, until: Int64(bitPattern: try input.u64())))
            }
            self = .blocks(entries)
        case .done:
            self = .done(sockets: try input.u32(), stateBytes: try input.u32(), blocks: try input.u32())
        case .ready:
            self = .ready(pid: Int32(bitPattern: try input.u32()))
        case .failed:
            self = .failed(String(decoding: input.rest(), as: UTF8.self))
        }
        guard input.atEnd else { throw DecodingError(description: "trailing bytes") }
    }
}

/// Big-endian appends for `HandoverMessage`.
struct HandoverOutput {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { for shift in [8, 0] { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) } }
    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }
    mutating func u64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }
    /// Family (4 or 6), the address bytes, the port.
    mutating func address(_ address: TransportAddress) {
        u8(address.ip.family == .ipv4 ? 4 : 6)
        for i in 0..<address.ip.byteCount { bytes.append(address.ip.byte(i)) }
        u16(address.port)
    }
}

/// Bounds-checked big-endian reads for `HandoverMessage`.
struct HandoverInput {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    private mutating func take(_ count: Int) throws(HandoverMessage.DecodingError) -> UnsafeRawBufferPointer {
        guard bytes.count - offset >= count else { throw .init(description: "message cut short") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8() throws(HandoverMessage.DecodingError) -> UInt8 { try take(1)[0] }
    mutating func u16() throws(HandoverMessage.DecodingError) -> UInt16 {
        let b = try take(2)
        return UInt16(b[0]) << 8 | UInt16(b[1])
    }
    mutating func u32() throws(HandoverMessage.DecodingError) -> UInt32 {
        try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }
    mutating func u64() throws(HandoverMessage.DecodingError) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
    mutating func address() throws(HandoverMessage.DecodingError) -> TransportAddress {
        let count: Int
        switch try u8() {
        case 4: count = 4
        case 6: count = 16
        default: throw .init(description: "unknown address family")
        }
        guard let ip = IPAddress(bytes: try take(count)) else { throw .init(description: "bad address") }
        return TransportAddress(ip: ip, port: try u16())
    }
    mutating func bytes(_ count: Int) throws(HandoverMessage.DecodingError) -> [UInt8] { Array(try take(count)) }

    /// A 32-bit length, at most `max`, then that many bytes.
    mutating func counted(max: Int) throws(HandoverMessage.DecodingError) -> [UInt8] {
        let count = Int(try u32())
        guard count <= max else { throw .init(description: "a field longer than \(max) bytes") }
        return try bytes(count)
    }

    /// A 32-bit length, at most `max`, then that many bytes of key material, copied once into
    /// a buffer that is wiped when released.
    mutating func countedSecret(max: Int) throws(HandoverMessage.DecodingError) -> SecretBytes {
        let count = Int(try u32())
        guard count <= max else { throw .init(description: "a field longer than \(max) bytes") }
        return SecretBytes(copying: try take(count))
    }

    mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }
}
