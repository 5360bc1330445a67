import Glibc
import Relay
import StunCodec
import Testing

/// `ConfigAdvisor`: one warning per likely mistake, none for a sound configuration.
@Suite struct ConfigAdvisorTests {
    /// The host's addresses as the tests pretend them: loopback plus one private address.
    private static let interfaces = [IPAddress.ipv4Loopback, IPAddress("10.0.0.5")!, .ipv6Loopback]

    /// A sound server: one public address, listener and relay on it, TLS off, loopback peers off.
    private static func sound(_ edit: (inout RelayConfiguration) -> Void = { _ in }) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.listeningIPs = [IPAddress("192.0.2.10")!]
        c.relayIPs = [IPAddress("192.0.2.10")!]
        c.noTLS = true
        c.useAuthSecret = true
        c.staticAuthSecrets = ["s"]
        edit(&c)
        return c
    }

    private static let hostWithPublicAddress = interfaces + [IPAddress("192.0.2.10")!]

    private func warnings(_ c: RelayConfiguration, interfaces: [IPAddress] = hostWithPublicAddress) -> [String] {
        ConfigAdvisor.warnings(for: c, interfaceAddresses: interfaces)
    }

    @Test("no-auth without stun-only is named (check-config shows it as well as the server's start)")
    func openRelayIsNamed() {
        let open = Self.sound {
            $0.useAuthSecret = false
            $0.staticAuthSecrets = []
            $0.noAuth = true
        }
        #expect(warnings(open) == ["no-auth without stun-only: anyone can allocate relays on this server"])
        #expect(warnings(Self.sound { $0.noAuth = true; $0.stunOnly = true; $0.useAuthSecret = false }) == [])
    }

    @Test("state-dir: a private directory, or one that can be made, is quiet; open to others, a file or unwritable is named")
    func stateDir() throws {
        var template = Array("/tmp/relayd-statedir-XXXXXX".utf8CString)
        let made = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        let dir = String(cString: made)
        defer {
            unlink(dir + "/file")
            rmdir(dir + "/state")
            rmdir(dir)
        }
        chmod(dir, 0o700)
        #expect(warnings(Self.sound { $0.stateDir = dir }) == [])
        #expect(warnings(Self.sound { $0.stateDir = dir + "/state" }) == [], "missing, but it can be made")
        chmod(dir, 0o755)
        let openToOthers = warnings(Self.sound { $0.stateDir = dir })
        #expect(openToOthers.count == 1 && openToOthers[0].contains("open to other users (mode 755)"))
        let fd = open(dir + "/file", O_CREAT | O_WRONLY, 0o600)
        close(fd)
        let file = warnings(Self.sound { $0.stateDir = dir + "/file" })
        #expect(file.count == 1 && file[0].contains("is not a directory"))
        let nowhere = warnings(Self.sound { $0.stateDir = dir + "/file/state" })
        #expect(nowhere.count == 1 && nowhere[0].contains("cannot be created"))
    }

    @Test("A sound configuration draws no warning")
    func soundConfigurationIsQuiet() {
        #expect(warnings(Self.sound()) == [])
    }

    @Test("A loopback-only test server (loopback peers, TLS off) draws no warning")
    func loopbackServerIsQuiet() {
        let c = Self.sound {
            $0.listeningIPs = [.ipv4Loopback]
            $0.relayIPs = [.ipv4Loopback]
            $0.allowLoopbackPeers = true
        }
        #expect(warnings(c) == [])
    }

    @Test("A relay address that is not the host's, with no external-ip, is named")
    func nonLocalRelayAddress() throws {
        let c = Self.sound { $0.relayIPs = [IPAddress("203.0.113.7")!] }
        let found = warnings(c)
        try #require(found.count == 1)
        #expect(found[0].contains("203.0.113.7 is not an address of this host"))
        #expect(found[0].contains("external-ip=203.0.113.7/<private>"))
    }

    @Test("listening-ip stands in for an unset relay-ip in the locality check")
    func nonLocalListeningAddressAsRelay() {
        let c = Self.sound {
            $0.relayIPs = []
            $0.listeningIPs = [IPAddress("198.51.100.1")!]
        }
        #expect(warnings(c).contains { $0.contains("198.51.100.1 is not an address of this host") })
    }

    @Test("A non-local relay address that an external-ip maps is not flagged as non-local")
    func mappedRelayAddressIsNotFlaggedNonLocal() {
        let c = Self.sound {
            $0.relayIPs = [IPAddress("10.0.0.5")!]
            $0.externalIPs = [.init(publicIP: IPAddress("203.0.113.7")!, privateIP: IPAddress("10.0.0.5")!)]
        }
        #expect(warnings(c) == [])
    }

    @Test("A relay port range smaller than total-quota is named")
    func rangeSmallerThanTotalQuota() throws {
        let c = Self.sound {
            $0.minPort = 50000
            $0.maxPort = 50099
            $0.totalQuota = 500
        }
        let found = warnings(c)
        try #require(found.count == 1)
        #expect(found[0].contains("50000-50099 (100 ports) is smaller than total-quota 500"))
    }

    @Test("A relay port range smaller than user-quota is named; a quota that fits is not")
    func rangeSmallerThanUserQuota() {
        let tight = Self.sound {
            $0.minPort = 50000
            $0.maxPort = 50009
            $0.userQuota = 11
        }
        #expect(warnings(tight).count == 1)
        #expect(warnings(tight).first?.contains("smaller than user-quota 11") == true)
        let fits = Self.sound {
            $0.minPort = 50000
            $0.maxPort = 50009
            $0.userQuota = 10
            $0.totalQuota = 10
        }
        #expect(warnings(fits) == [])
    }

    @Test(
        "A private relay address without external-ip, served on a public listener, is named",
        arguments: ["10.0.0.5", "172.16.4.4", "192.168.1.1", "100.64.0.9", "fd00::5"])
    func privateRelayWithoutMapping(address: String) throws {
        let ip = try #require(IPAddress(address))
        let c = Self.sound {
            $0.relayIPs = [ip]
            $0.listeningIPs = [IPAddress("192.0.2.10")!]
        }
        let found = warnings(c, interfaces: Self.hostWithPublicAddress + [ip])
        try #require(found.count == 1)
        #expect(found[0].contains("relay address \(ip) is private"))
        #expect(found[0].contains("external-ip=<public>/\(ip)"))
    }

    @Test("Listening on all addresses of a NATed host still draws the private-address warning")
    func privateRelayOnAllAddresses() {
        var c = RelayConfiguration()
        c.noTLS = true
        let found = warnings(c, interfaces: Self.interfaces)
        #expect(
            found == [
                "relay address 10.0.0.5 is private (RFC 1918) and no external-ip maps it: clients on the internet "
                    + "cannot reach the relayed addresses handed out (behind 1:1 NAT set external-ip=<public>/10.0.0.5)"
            ])
    }

    @Test("Private relay addresses are fine when every listener is private or loopback too")
    func privateRelayOnPrivateNetwork() {
        let c = Self.sound {
            $0.listeningIPs = [IPAddress("10.0.0.5")!, .ipv4Loopback]
            $0.relayIPs = [IPAddress("10.0.0.5")!]
        }
        #expect(warnings(c) == [])
    }

    @Test("allow-loopback-peers on a non-loopback listener is named")
    func loopbackPeersOnPublicListener() throws {
        let c = Self.sound { $0.allowLoopbackPeers = true }
        let found = warnings(c)
        try #require(found.count == 1)
        #expect(found[0].contains("allow-loopback-peers is on while listening on 192.0.2.10"))
    }

    @Test("allow-loopback-peers while listening on every address is named")
    func loopbackPeersOnAllAddresses() {
        let c = Self.sound {
            $0.listeningIPs = [.ipv4Any]
            $0.allowLoopbackPeers = true
        }
        #expect(warnings(c).contains { $0.contains("listening on 0.0.0.0 (all addresses)") })
    }

    @Test("A TLS listener without cert is named")
    func tlsWithoutCertificate() throws {
        let c = Self.sound {
            $0.noTLS = false
            $0.tlsListeningPort = 443
        }
        let found = warnings(c)
        try #require(found.count == 1)
        #expect(found[0].contains("TLS listener (port 443) is enabled but no cert is set"))
    }

    @Test("A cert or pkey file that cannot be read is named")
    func tlsFilesUnreadable() {
        let c = Self.sound {
            $0.noTLS = false
            $0.cert = "/nonexistent/relayd-cert.pem"
            $0.pkey = "/nonexistent/relayd-pkey.pem"
        }
        let found = warnings(c)
        #expect(found.count == 2)
        #expect(found.contains { $0.contains("cert '/nonexistent/relayd-cert.pem' is not a readable file") })
        #expect(found.contains { $0.contains("pkey '/nonexistent/relayd-pkey.pem' is not a readable file") })
    }

    @Test("Only wildcard listeners and no relay-ip leave no relay address")
    func noRelayAddress() {
        let c = Self.sound {
            $0.listeningIPs = [.ipv4Any]
            $0.relayIPs = []
        }
        #expect(warnings(c).contains { $0.hasPrefix("no relay address") })
    }

    @Test("bps-capacity without max-bps, and a max-bps below one audio stream, are warned about")
    func bandwidthWarnings() {
        func maxBPSWarnings(_ maxBPS: Int, capacity: Int = 0) -> [String] {
            let c = Self.sound {
                $0.maxBPS = maxBPS
                $0.bpsCapacity = capacity
            }
            return warnings(c).filter { $0.contains("max-bps") }
        }
        let none = maxBPSWarnings(0, capacity: 10_000_000)
        #expect(none.count == 1 && none.first?.contains("no effect without max-bps") == true)
        let bits = maxBPSWarnings(500)
        #expect(bits.count == 1 && bits.first?.contains("bytes a second, not bits") == true)
        #expect(maxBPSWarnings(125_000, capacity: 10_000_000).isEmpty)
    }
}
