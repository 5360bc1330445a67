import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Two REST clients with UDP (or, for B, stream) allocations for the relay-to-relay
/// short-circuit tests: A on `sender`, B on `receiver`. With `loops: 1` both are one core; with
/// `loops: 2` they are loop threads 0 and 1 sharing a relayed-address directory and an admission ledger;
/// `streamSink`: B's connection as the stream transport lists it (`StreamSinkHooks`), so a stream
/// B is in the directory as it is in the server.
struct RelayPair {
    let sender: CoreHarness
    let receiver: CoreHarness
    let a: TurnTestClient
    let b: TurnTestClient
    /// A's and B's relayed addresses as XOR-RELAYED-ADDRESS gave them (advertised form).
    let relayedA: TransportAddress
    let relayedB: TransportAddress

    init(
        loops: Int, _ options: CoreFixture.Options = CoreFixture.options(),
        transportB: TransportProtocol = .udp, streamSink: RecordingStreamSink? = nil
    ) throws {
        if loops == 1 {
            sender = CoreHarness(options: options)
            receiver = sender
        } else {
            let admission = LocalAdmissionLedger(limits: .init(bpsCapacity: options.bpsCapacity))
            let directory = RelayedAddressDirectory()
            let ports = CoreFixture.portPool(options)
            sender = CoreHarness(
                options: options,
                loop: .init(index: 0, count: 2, admission: admission, directory: directory, ports: ports))
            receiver = CoreHarness(
                options: options,
                loop: .init(index: 1, count: 2, admission: admission, directory: directory, ports: ports))
        }
        if let streamSink {
            streamSink.install(owner: receiver.core, client: CoreFixture.clientB)
        }
        a = sender.restClient(at: CoreFixture.clientA, user: "a")
        b = receiver.restClient(at: CoreFixture.clientB, user: "b", transport: transportB)
        relayedA = try #require(try a.allocate().xorRelayedAddress)
        relayedB = try #require(try b.allocate().xorRelayedAddress)
        // Nothing is listed before its first permission (`RelayedAddressDirectory.publish`).
        if loops > 1 { #expect(sender.core.tables.directory.count == 0) }
    }
}
