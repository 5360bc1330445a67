import RelayCore
import StunCodec

/// Relay sockets for driving `RelayCore` without the network: the harness executes the core's
/// `openRelaySocket` and `closeRelaySocket` commands here. It hands out fake descriptors,
/// remembers what each is bound to, counts opens and closes, and refuses the ports in
/// `refusedPorts` (or an address already bound) the way the kernel answers EADDRINUSE.
final class FakeRelaySocketProvider {
    /// Ports another process is pretending to hold; opening them fails.
    var refusedPorts: Set<UInt16> = []
    /// When set, every open fails as the kernel answers EMFILE.
    var outOfDescriptors = false
    /// Opens refused for want of descriptors.
    private(set) var exhaustedAttempts = 0
    private(set) var opens = 0
    private(set) var closes = 0
    /// Attempts that failed because the port was refused or the address was already bound.
    private(set) var refusals = 0
    /// Live descriptors and the address each is bound to.
    private(set) var bound: [RelaySocket: TransportAddress] = [:]
    /// Every descriptor closed so far, in order.
    private(set) var closed: [RelaySocket] = []
    private var nextDescriptor: Int32 = 100

    /// Executes an `openRelaySocket` command.
    func open(_ request: RelaySocketOpen) -> RelaySocketOpening {
        request.tcp ? openTCPRelaySocket(bound: request.address) : openRelaySocket(bound: request.address)
    }

    func openRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        if outOfDescriptors {
            exhaustedAttempts += 1
            return .exhausted
        }
        if refusedPorts.contains(address.port) || bound.values.contains(address) {
            refusals += 1
            return .portInUse
        }
        let socket = RelaySocket(descriptor: nextDescriptor)
        nextDescriptor += 1
        opens += 1
        bound[socket] = address
        return .opened(socket)
    }

    /// TCP allocations' listeners (RFC 6062) among the live descriptors.
    private(set) var tcpListeners: Set<RelaySocket> = []

    func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        let opening = openRelaySocket(bound: address)
        if case .opened(let socket) = opening { tcpListeners.insert(socket) }
        return opening
    }

    /// Lists a socket opened elsewhere (an adopted allocation's) as open and bound to `address`.
    func adopt(_ socket: RelaySocket, bound address: TransportAddress) { bound[socket] = address }

    /// Executes a `closeRelaySocket` command.
    func closeRelaySocket(_ socket: RelaySocket) {
        precondition(bound[socket] != nil, "closing relay socket \(socket) that is not open")
        closes += 1
        bound[socket] = nil
        tcpListeners.remove(socket)
        closed.append(socket)
    }

    /// The live relay socket bound to `address`.
    func descriptor(boundTo address: TransportAddress) -> RelaySocket? {
        bound.first { $0.value == address }?.key
    }
}
