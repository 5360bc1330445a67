import Glibc
import StunCodec

/// Runs one TURN request per client over UDP with at most `window` transactions in flight,
/// doing the long-term credential dance (unsigned → 401 → signed; 438 → new nonce → signed)
/// and retransmitting on silence (RFC 8489 §6.2.1, simplified: fixed RTO, bounded attempts).
final class TransactionRunner {
    let clients: [TurnClient]
    let window: Int
    let rtoNs: UInt64
    let maxAttempts: Int
    private let poller: Poller
    /// The server, for replacing a client's socket after a 437 on Allocate (nil: never).
    var server: TransportAddress?
    var reopenBufferBytes: Int32 = 65_536
    /// How many sockets may still be replaced after a 437.
    var reopenBudget = 1000
    private let buffer: UnsafeMutableRawBufferPointer
    /// Transaction IDs: a load generator's thousands a second would otherwise cost two
    /// getrandom(2) calls each, time taken from the server on the same cores. On loopback the
    /// IDs only have to be distinct; RFC 8489 §5's unguessable IDs matter on a real network.
    private var random = FastRandom(seed: UInt64.random(in: 1...UInt64.max))

    /// Per-client transaction state, indexed by client index.
    private var ids: [TransactionID]
    private var requests: [[UInt8]]
    private var sentAt: [UInt64]
    private var attempts: [Int]
    private var challenges: [Int]
    private var active: [Bool]

    init(clients: [TurnClient], window: Int, rtoMs: Int = 500, maxAttempts: Int = 6) {
        self.clients = clients
        self.window = max(1, window)
        self.rtoNs = UInt64(rtoMs) * 1_000_000
        self.maxAttempts = maxAttempts
        poller = Poller(capacity: 512)
        buffer = .allocate(byteCount: 65_536, alignment: 16)
        let n = clients.count
        ids = Array(repeating: TransactionID(high: 0, low: 0), count: n)
        requests = Array(repeating: [], count: n)
        sentAt = Array(repeating: 0, count: n)
        attempts = Array(repeating: 0, count: n)
        challenges = Array(repeating: 0, count: n)
        active = Array(repeating: false, count: n)
    }

    deinit { buffer.deallocate() }

    /// Sends `request` for every client in `indices` and waits for all outcomes.
    /// `onSuccess` inspects a success response and returns false when it lacks what is needed.
    func run(
        _ request: TurnRequest, on indices: [Int], deadlineNs: UInt64 = .max,
        onSuccess: (TurnClient, StunMessage) -> Bool = { _, _ in true }
    ) -> SetupTally {
        var tally = SetupTally()
        var queue = indices[...]
        var inFlight: [Int] = []
        inFlight.reserveCapacity(window)
        let start = Clock.now()
        var lastDone = start

        func begin(_ i: Int) {
            challenges[i] = 0
            attempts[i] = 0
            active[i] = true
            transmit(i, request, fresh: true)
        }
        func finish(_ i: Int) {
            active[i] = false
            if let k = inFlight.firstIndex(of: i) { inFlight.swapAt(k, inFlight.count - 1); inFlight.removeLast() }
            lastDone = Clock.now()
        }

        while !queue.isEmpty || !inFlight.isEmpty {
            while inFlight.count < window, let i = queue.popFirst() {
                inFlight.append(i)
                begin(i)
            }
            poller.removeAll()
            for i in inFlight { poller.add(clients[i].fd, token: i) }
            let ready = poller.wait(timeoutMs: 10)
            for e in 0..<ready {
                let i = poller.ready[e]
                let client = clients[i]
                // One datagram per readiness: a transaction expects one answer, poll reports the
                // socket again while more wait, and a second recv would mostly find nothing.
                client.receive(into: buffer, datagrams: 1) { bytes in
                    guard active[i] else { return }
                    guard let message = try? StunMessage(parsing: bytes), message.transactionID == ids[i],
                        message.type.method == request.method
                    else { return }
                    switch message.type.messageClass {
                    case .successResponse:
                        if onSuccess(client, message) { tally.succeeded += 1 } else { tally.fail(1) }
                        finish(i)
                    case .errorResponse:
                        let code = (try? message.decode(ErrorCode.self))?.code ?? 1
                        let realm = try? message.decode(Realm.self)
                        let nonce = try? message.decode(Nonce.self)
                        if code == 437, request.method == .allocate, reopenBudget > 0, let server,
                            client.reopen(server: server, bufferBytes: reopenBufferBytes)
                        {
                            // A previous run's allocation still holds this 5-tuple: new local port.
                            reopenBudget -= 1
                            tally.reopened += 1
                            challenges[i] = 0
                            transmit(i, request, fresh: true)
                        } else if (code == 401 || code == 438), challenges[i] < 2, let nonce {
                            challenges[i] += 1
                            client.learn(realm: realm?.value, nonce: nonce.value)
                            transmit(i, request, fresh: true)
                        } else {
                            tally.fail(code)
                            finish(i)
                        }
                    default:
                        return
                    }
                }
            }
            let now = Clock.now()
            if now > deadlineNs {
                for i in inFlight { tally.fail(0); active[i] = false }
                inFlight.removeAll()
                for _ in queue { tally.fail(0) }
                queue = [][...]
                break
            }
            var k = 0
            while k < inFlight.count {
                let i = inFlight[k]
                if now &- sentAt[i] >= rtoNs {
                    if attempts[i] >= maxAttempts {
                        tally.fail(0)
                        finish(i)
                        continue
                    }
                    tally.retransmits += 1
                    transmit(i, request, fresh: false)
                }
                k += 1
            }
        }
        tally.elapsedNs = lastDone &- start
        return tally
    }

    /// Sends (a fresh transaction, or a retransmission of the same bytes) for client `i`.
    private func transmit(_ i: Int, _ request: TurnRequest, fresh: Bool) {
        let client = clients[i]
        if fresh {
            ids[i] = TransactionID(high: UInt32(truncatingIfNeeded: random.next()), low: random.next())
            requests[i] = (try? request.encode(for: client, id: ids[i])) ?? []
        }
        attempts[i] += 1
        sentAt[i] = Clock.now()
        requests[i].withUnsafeBytes { _ = client.send($0) }
    }
}
