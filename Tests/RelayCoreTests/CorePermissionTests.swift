import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// CreatePermission and permission lifetime (RFC 8656 §9, §10; RFC 6156 §5).
@Suite struct CorePermissionTests {
    /// A harness with an allocation for client A; returns the client and its relay socket.
    private func allocated(_ options: CoreFixture.Options = CoreFixture.options()) throws
        -> (CoreHarness, TurnTestClient, RelaySocket)
    {
        let harness = CoreHarness(options: options)
        let client = harness.restClient(at: CoreFixture.clientA)
        let relayed = try #require(try client.allocate().xorRelayedAddress)
        return (harness, client, try #require(harness.sockets.descriptor(boundTo: relayed)))
    }

    @Test("CreatePermission installs a permission: the peer's data is relayed to the client")
    func permissionAllowsPeerData() throws {
        let (harness, client, socket) = try allocated()
        let response = try client.createPermission([CoreFixture.peer1])
        #expect(response.isSuccess)
        #expect(response.integrity(key: client.key) == .valid)
        let sent = harness.receiveFromPeer([1, 2, 3], from: CoreFixture.peer1, at: socket)
        #expect(sent.count == 1)
        #expect(sent.first?.client == CoreFixture.clientA)
    }

    @Test(
        "CreatePermission for a peer the policy denies gets 403 (RFC 8656 §10.2)",
        arguments: [
            "10.1.2.3:5000", "127.0.0.1:5000", "169.254.169.254:80", "192.168.1.1:5000", "100.64.0.1:5000",
            "224.0.0.1:5000", "255.255.255.255:5000", "0.0.0.0:5000", "10.0.0.5:3478",
        ])
    func deniedPeer(peer: String) throws {
        let (harness, client, _) = try allocated()
        let response = try client.createPermission([.literal(peer)])
        #expect(response.errorCode == 403)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.isEmpty == true)
    }

    @Test("With several XOR-PEER-ADDRESS of which one is denied, the answer is 403 and none is installed")
    func oneDeniedPeerInstallsNone() throws {
        let (harness, client, socket) = try allocated()
        let response = try client.createPermission([
            CoreFixture.peer1, .literal("192.168.0.10:5000"), CoreFixture.peer2,
        ])
        #expect(response.errorCode == 403)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.isEmpty == true)
        #expect(harness.receiveFromPeer([9], from: CoreFixture.peer1, at: socket).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
    }

    @Test(
        "An IPv6 XOR-PEER-ADDRESS on an IPv4 allocation gets 443 (RFC 6156 §5)",
        arguments: ["[2001:4860::1]:5000", "[::ffff:1.2.3.4]:5000"])
    func peerFamilyMismatch(peer: String) throws {
        let (harness, client, _) = try allocated()
        let response = try client.createPermission([CoreFixture.peer1, .literal(peer)])
        #expect(response.errorCode == 443)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.isEmpty == true)
    }

    @Test("CreatePermission without XOR-PEER-ADDRESS gets 400")
    func noPeer() throws {
        let (_, client, _) = try allocated()
        #expect(try client.createPermission([]).errorCode == 400)
    }

    @Test("CreatePermission without an allocation gets 437")
    func noAllocation() throws {
        let harness = CoreHarness()
        #expect(try harness.restClient(at: CoreFixture.clientA).createPermission([CoreFixture.peer1]).errorCode == 437)
    }

    @Test(
        "A permission lasts 300 s: data at 299 s is relayed, at 301 s dropped and counted no_permission (RFC 8656 §9)")
    func permissionExpiry() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let installed = harness.now

        harness.advance(to: installed + 299)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer1, at: socket).count == 1)
        #expect(
            harness.receive(
                try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [2]), from: CoreFixture.clientA
            ).count == 1)

        harness.advance(to: installed + 301)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer1, at: socket).isEmpty)
        #expect(
            harness.receive(
                try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [2]), from: CoreFixture.clientA
            ).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 2)
    }

    @Test("A permission is per IP address: data from any port of the peer's IP is relayed (RFC 8656 §9)")
    func permissionIgnoresPort() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        let otherPort = TransportAddress(ip: CoreFixture.peer1.ip, port: 61000)
        let sent = harness.receiveFromPeer([7], from: otherPort, at: socket)
        let indication = try ReceivedStun(try #require(sent.first).bytes)
        #expect(indication.xorPeerAddress == otherPort)
    }

    @Test("Refreshing a permission restarts its 300 s")
    func permissionRefresh() throws {
        let (harness, client, socket) = try allocated()
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        harness.advance(by: 200)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        harness.advance(by: 299)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer1, at: socket).count == 1)
        harness.advance(by: 2)
        #expect(harness.receiveFromPeer([1], from: CoreFixture.peer1, at: socket).isEmpty)
    }

    @Test("More permissions than max-permissions-per-allocation get 508 and none of the request is installed")
    func permissionLimit() throws {
        let (harness, client, _) = try allocated(CoreFixture.options { $0.settings.maxPermissionsPerAllocation = 2 })
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        #expect(try client.createPermission([CoreFixture.peer2, .literal("9.9.9.9:53")]).errorCode == 508)
        #expect(try client.createPermission([CoreFixture.peer2]).isSuccess)
        #expect(try client.createPermission([.literal("9.9.9.9:53")]).errorCode == 508)
        // Refreshing an installed permission at the limit is fine.
        #expect(try client.createPermission([CoreFixture.peer1, CoreFixture.peer2]).isSuccess)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.count == 2)

        // Once one expires there is room again.
        harness.advance(by: 301)
        #expect(try client.createPermission([.literal("9.9.9.9:53")]).isSuccess)
    }
}
