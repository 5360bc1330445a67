import Foundation
import Glibc
import Relay
import RelayCore
import StunCodec
import Synchronization
import Testing

@testable import CoreTestSupport

/// `--self-test`: a Binding from the relay address to the server's own listener, against a UDP
/// socket on 127.0.0.1 that answers Bindings the way the listener does.
@Suite struct SelfTestTests {
    /// Answers Binding requests on 127.0.0.1 with XOR-MAPPED-ADDRESS set to the source, on its own
    /// thread, after ignoring the first `ignoring` requests; `wrongTransaction` answers with a
    /// transaction ID of its own.
    final class BindingResponder: @unchecked Sendable {
        // @unchecked: `socket` is used only by the responder thread once started; `state` is a `Locked`.
        private let socket: UDPTestSocket
        let address: TransportAddress
        private let state = Locked((stopped: false, requests: 0))
        private let done = DispatchSemaphore(value: 0)

        init(ignoring: Int = 0, wrongTransaction: Bool = false) throws {
            socket = try UDPTestSocket(timeoutMilliseconds: 50)
            address = socket.address
            let thread = Thread { [self] in
                while !state.withLock({ $0.stopped }) {
                    guard let (bytes, from) = try? socket.receive(),
                        let request = try? ReceivedStun(bytes), request.type == .bindingRequest
                    else { continue }
                    let seen = state.withLock { state -> Int in
                        state.requests += 1
                        return state.requests
                    }
                    guard seen > ignoring else { continue }
                    let id = wrongTransaction ? TransactionID.random() : request.transactionID
                    let mapped = XORMappedAddress(address: from)
                    let answer = try? StunTestMessages.build(.bindingSuccess, transactionID: id) {
                        try $0.append(mapped)
                    }
                    if let answer { try? socket.send(answer, to: from) }
                }
                done.signal()
            }
            thread.start()
        }

        /// Binding requests received so far.
        var requests: Int { state.withLock { $0.requests } }

        /// Stops the thread and waits for it.
        func stop() {
            state.withLock { $0.stopped = true }
            done.wait()
        }
    }

    @Test("The listener's answer gives the relay address and the probe's port as XOR-MAPPED-ADDRESS")
    func mappedAddress() throws {
        let responder = try BindingResponder()
        defer { responder.stop() }
        let outcome = SelfTest.probe(from: .ipv4Loopback, to: responder.address)
        guard case .mapped(let seen) = outcome else {
            Issue.record("expected an answer, got \(outcome)")
            return
        }
        #expect(seen.ip == .ipv4Loopback)
        #expect(seen.port != 0 && seen.port != responder.address.port)
    }

    @Test("A lost request is sent again: the second answer counts")
    func retries() throws {
        let responder = try BindingResponder(ignoring: 1)
        defer { responder.stop() }
        let outcome = SelfTest.probe(from: .ipv4Loopback, to: responder.address, timeout: .milliseconds(900))
        #expect(responder.requests == 2)
        guard case .mapped = outcome else {
            Issue.record("expected an answer on the retry, got \(outcome)")
            return
        }
    }

    @Test("A silent listener gives 'no answer' after three attempts, within the time allowed")
    func silentListener() throws {
        let responder = try BindingResponder(ignoring: .max)
        defer { responder.stop() }
        let start = ContinuousClock.now
        let outcome = SelfTest.probe(from: .ipv4Loopback, to: responder.address, timeout: .milliseconds(300))
        let elapsed = ContinuousClock.now - start
        #expect(outcome == .noAnswer(attempts: 3))
        #expect(responder.requests == 3)
        #expect(elapsed >= .milliseconds(250) && elapsed < .seconds(2))
    }

    @Test("An answer to another transaction is not taken for the listener's")
    func foreignTransaction() throws {
        let responder = try BindingResponder(wrongTransaction: true)
        defer { responder.stop() }
        let outcome = SelfTest.probe(from: .ipv4Loopback, to: responder.address, timeout: .milliseconds(300))
        #expect(outcome == .noAnswer(attempts: 3))
    }

    @Test("A relay address this host does not have cannot be bound, and says so")
    func unbindableRelayAddress() throws {
        let outcome = SelfTest.probe(
            from: try #require(IPAddress("192.0.2.123")), to: TransportAddress(ip: .ipv4Loopback, port: 9))
        guard case .failed(let reason) = outcome else {
            Issue.record("expected a bind failure, got \(outcome)")
            return
        }
        #expect(reason.hasPrefix("cannot bind 192.0.2.123"))
    }

    @Test("run() tests every relay address of the configuration against its listener and summarises")
    func runOverConfiguration() throws {
        let responder = try BindingResponder()
        defer { responder.stop() }
        var c = RelayConfiguration()
        c.listeningIPs = [.ipv4Loopback]
        c.relayIPs = [.ipv4Loopback]
        c.externalIPs = [.init(publicIP: try #require(IPAddress("203.0.113.7")))]
        c.listeningPort = responder.address.port
        let results = SelfTest.run(configuration: c, interfaceAddresses: [.ipv4Loopback])
        try #require(results.count == 1)
        #expect(results[0].succeeded)
        #expect(results[0].target == responder.address)
        let advertised = try #require(IPAddress("203.0.113.7"))
        #expect(results[0].relay == RelayAddress(bound: .ipv4Loopback, advertised: advertised))
        let prefix = "self-test from 127.0.0.1 (advertised 203.0.113.7) to \(responder.address): "
        #expect(results[0].summary.hasPrefix(prefix))
        #expect(results[0].summary.contains("XOR-MAPPED-ADDRESS 127.0.0.1:"))
    }

    @Test("The target is loopback for wildcard or unset listeners, else the listener of the relay's family")
    func targets() throws {
        let relay = try #require(IPAddress("10.0.0.5"))
        var c = RelayConfiguration()
        c.listeningPort = 3478
        #expect(SelfTest.target(for: relay, configuration: c) == TransportAddress(ip: .ipv4Loopback, port: 3478))
        c.listeningIPs = [.ipv4Any]
        #expect(SelfTest.target(for: relay, configuration: c) == TransportAddress(ip: .ipv4Loopback, port: 3478))
        c.listeningIPs = [try #require(IPAddress("192.0.2.10")), .ipv6Loopback]
        #expect(SelfTest.target(for: relay, configuration: c)?.description == "192.0.2.10:3478")
        #expect(SelfTest.target(for: .ipv6Loopback, configuration: c)?.description == "[::1]:3478")
        c.noUDP = true
        #expect(SelfTest.target(for: relay, configuration: c) == nil)
    }
}
