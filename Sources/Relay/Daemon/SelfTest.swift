import RelayCore
import Glibc
import StunCodec

/// `--self-test`: from each relay address, a STUN Binding request to the server's own UDP
/// listener, and what came back. A mapped address equal to the relay address shows that relay
/// sockets can bind it and that the listener answers from there; "no answer" or a bind error
/// points at the address confusion `ConfigAdvisor` warns about.
public enum SelfTest {
    /// The outcome for one relay address.
    public struct Result: Sendable, Hashable {
        /// The relay address the request was sent from (and, if different, what clients are told).
        public var relay: RelayAddress
        /// The listener the request was sent to.
        public var target: TransportAddress
        public var outcome: Outcome

        public init(relay: RelayAddress, target: TransportAddress, outcome: Outcome) {
            self.relay = relay
            self.target = target
            self.outcome = outcome
        }

        /// One line for logs and `check-config`.
        public var summary: String {
            let from =
                relay.bound == relay.advertised ? "\(relay.bound)" : "\(relay.bound) (advertised \(relay.advertised))"
            let what: String
            switch outcome {
            case .mapped(let seen):
                let note =
                    seen.ip == relay.bound ? "" : " (not the relay address: a NAT or another route is in between)"
                what = "XOR-MAPPED-ADDRESS \(seen)\(note)"
            case .noAnswer(let attempts):
                what = "no answer after \(attempts) attempt\(attempts == 1 ? "" : "s")"
            case .failed(let reason):
                what = "failed: \(reason)"
            }
            return "self-test from \(from) to \(target): \(what)"
        }

        /// Whether the listener answered.
        public var succeeded: Bool {
            if case .mapped = outcome { return true }
            return false
        }
    }

    /// What a Binding exchange produced.
    public enum Outcome: Sendable, Hashable {
        /// A Binding success response carrying this XOR-MAPPED-ADDRESS.
        case mapped(TransportAddress)
        /// Nothing usable arrived within the time allowed, after this many requests.
        case noAnswer(attempts: Int)
        /// The exchange could not be attempted (no socket, address not bindable, send refused).
        case failed(String)
    }

    /// The UDP listener a request from `relay` goes to: the first `listening-ip` of its family
    /// on `listening-port`, loopback when listening on all addresses (or on a wildcard); nil
    /// when UDP is off or no listener has that family.
    public static func target(for relay: IPAddress, configuration c: RelayConfiguration) -> TransportAddress? {
        guard !c.noUDP else { return nil }
        let loopback = relay.family == .ipv4 ? IPAddress.ipv4Loopback : .ipv6Loopback
        let wildcard = relay.family == .ipv4 ? IPAddress.ipv4Any : .ipv6Any
        let candidates = c.listeningIPs.filter { $0.family == relay.family }
        if c.listeningIPs.isEmpty || candidates.contains(wildcard) || candidates.contains(loopback) {
            return TransportAddress(ip: loopback, port: c.listeningPort)
        }
        return candidates.first.map { TransportAddress(ip: $0, port: c.listeningPort) }
    }

    /// Runs the test from every relay address of `configuration` (as `ConfigAdvisor` derives
    /// them) to its listener. Blocks for at most about `timeout` per relay address.
    public static func run(
        configuration: RelayConfiguration, interfaceAddresses: [IPAddress], timeout: Duration = .seconds(1),
        attempts: Int = 3
    ) -> [Result] {
        ConfigAdvisor.relayAddresses(configuration, interfaceAddresses: interfaceAddresses).map { relay in
            guard let target = target(for: relay.bound, configuration: configuration) else {
                return Result(
                    relay: relay, target: TransportAddress(ip: relay.bound, port: 0),
                    outcome: .failed("no UDP listener of this address family"))
            }
            return Result(
                relay: relay, target: target,
                outcome: probe(from: relay.bound, to: target, timeout: timeout, attempts: attempts))
        }
    }

    /// Sends a Binding request from an ephemeral port on `source` to `target`, `attempts` times
    /// at most, waiting `timeout / attempts` for each answer; returns the first XOR-MAPPED-ADDRESS
    /// of a success response matching a request's transaction ID.
    public static func probe(
        from source: IPAddress, to target: TransportAddress, timeout: Duration = .seconds(1), attempts: Int = 3
    ) -> Outcome {
        guard source.family == target.ip.family else { return .failed("address families differ") }
        let local = TransportAddress(ip: source, port: 0)
        guard let fd = UDPSocket.open(bound: local, reusePort: false, bufferBytes: 65_536) else {
            return .failed("cannot bind \(source): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let tries = max(1, attempts)
        let wait = timeout / tries
        var sent: Set<TransactionID> = []
        for _ in 0..<tries {
            let id = TransactionID.random()
            sent.insert(id)
            guard send(bindingRequest(id), from: fd, to: target) else {
                return .failed("cannot send to \(target): \(String(cString: strerror(errno)))")
            }
            if let mapped = awaitAnswer(on: fd, from: target, accepting: sent, within: wait) { return .mapped(mapped) }
        }
        return .noAnswer(attempts: tries)
    }

    /// A Binding request with no attributes (RFC 8489 §6.1).
    static func bindingRequest(_ id: TransactionID) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 20)
        let count = buffer.withUnsafeMutableBytes { raw in
            (try? StunMessageWriter(into: raw, type: .bindingRequest, transactionID: id))?.count ?? 0
        }
        return Array(buffer[0..<count])
    }

    private static func send(_ bytes: [UInt8], from fd: Int32, to target: TransportAddress) -> Bool {
        var storage = sockaddr_storage()
        let sent = withUnsafeMutableBytes(of: &storage) { raw -> Int in
            let length = SocketAddress.write(target, into: raw.baseAddress!)
            return bytes.withUnsafeBytes { payload in
                sendto(
                    fd, payload.baseAddress, payload.count, 0, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self),
                    length)
            }
        }
        return sent == bytes.count
    }

    /// Reads datagrams until one from `target` is a Binding success for one of `ids`, or `limit`
    /// passes; returns its XOR-MAPPED-ADDRESS.
    private static func awaitAnswer(
        on fd: Int32, from target: TransportAddress, accepting ids: Set<TransactionID>, within limit: Duration
    ) -> TransportAddress? {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        var buffer = [UInt8](repeating: 0, count: 1500)
        while clock.now < deadline {
            let left = clock.now.duration(to: deadline)
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length)
                    }
                }
            }
            guard count > 0 else { continue }
            let from = withUnsafeBytes(of: &storage) { SocketAddress.read($0.baseAddress!) }
            guard from == target else { continue }
            if let mapped = mappedAddress(buffer[0..<count], accepting: ids) { return mapped }
        }
        return nil
    }

    /// The XOR-MAPPED-ADDRESS of a Binding success response to one of `ids`, else nil.
    static func mappedAddress(_ bytes: ArraySlice<UInt8>, accepting ids: Set<TransactionID>) -> TransportAddress? {
        bytes.withUnsafeBytes { raw -> TransportAddress? in
            guard let message = try? StunMessage(parsing: raw), message.type == .bindingSuccess,
                ids.contains(message.transactionID)
            else { return nil }
            return (try? message.decode(XORMappedAddress.self))??.address
        }
    }
}
