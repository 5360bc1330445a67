import Relay
import StunCodec
import Testing

/// Rules across keys, checked after the command line is merged over the file.
@Suite struct ConfigValidationTests {
    private let file = "conf/relayd.conf"

    private func load(_ text: String, _ arguments: [String] = []) throws -> ConfigLoadResult {
        try RelayConfiguration.load(fileText: text, fileName: file, arguments: arguments)
    }

    private func failure(_ text: String, _ arguments: [String] = []) -> ConfigError? {
        #expect(throws: ConfigError.self) { try load(text, arguments) }
    }

    @Test func minPortAboveMaxPortIsAConflict() {
        let error = failure("no-auth\nmin-port=60000\nmax-port=50000\n")
        #expect(error?.code == .conflict)
        #expect(
            error?.description == "conf/relayd.conf:3: key 'max-port': min-port 60000 is greater than max-port 50000")
    }

    @Test func minPortAboveTheDefaultMaxPortNamesMinPort() {
        #expect(throws: Never.self) { try load("no-auth\nmin-port=65535\n") }
        let error = failure("no-auth\n", ["--min-port=65535", "--max-port=65534"])
        #expect(error?.description == "command line: key 'max-port': min-port 65535 is greater than max-port 65534")
    }

    @Test func equalMinAndMaxPortIsOneRelayPort() throws {
        let config = try load("no-auth\nmin-port=50000\nmax-port=50000\n").configuration
        #expect(config.minPort == 50000 && config.maxPort == 50000)
    }

    @Test func useAuthSecretNeedsASecret() {
        let error = failure("use-auth-secret\n")
        #expect(
            error?.description == "conf/relayd.conf:1: key 'use-auth-secret': needs at least one 'static-auth-secret'")
    }

    @Test func aUserDatabaseMayHoldTheUsersAndSecrets() throws {
        // Secrets and users may all come from coturn's database (docs/userdb.md).
        let secrets = try load("use-auth-secret\nuserdb=/var/lib/turn/turndb\n")
        #expect(secrets.configuration.useAuthSecret && secrets.warnings.isEmpty)
        let users = try load("psql-userdb=host=db dbname=turn\n").configuration
        #expect(users.ltCredMech && users.postgresUserDatabase == "host=db dbname=turn")
        #expect(try load("db=/tmp/turndb\nlt-cred-mech\n").configuration.userDatabase == "/tmp/turndb")
        #expect(try load("sql-userdb=host=db\nlt-cred-mech\n").configuration.postgresUserDatabase == "host=db")
        let redis = try load("redis-userdb=ip=127.0.0.1 port=6380 dbname=2 password=turn\nlt-cred-mech\n").configuration
        #expect(redis.redisUserDatabase == RedisEndpoint(host: "127.0.0.1", port: 6380, password: "turn", database: 2))
        #expect(try load("redis-userdb=redis://127.0.0.1/3\nlt-cred-mech\n").configuration.redisUserDatabase?.database == 3)
        #expect(failure("redis-userdb=ip=127.0.0.1 port=x\nlt-cred-mech\n") != nil)
        #expect(
            failure("lt-cred-mech\nuserdb=/tmp/turndb\nredis-userdb=ip=127.0.0.1\n")?.description
                == "conf/relayd.conf:3: key 'redis-userdb': cannot be combined with 'userdb': relayd reads one user database")
        let both = failure("lt-cred-mech\nuserdb=/tmp/turndb\npsql-userdb=host=db\n")
        #expect(
            both?.description
                == "conf/relayd.conf:3: key 'psql-userdb': cannot be combined with 'userdb': relayd reads one user database")
    }

    @Test func twoStaticAuthSecretsAreBothKeptForRotation() throws {
        let config = try load("use-auth-secret\nstatic-auth-secret=north\nstatic-auth-secret=south\n").configuration
        #expect(config.useAuthSecret)
        #expect(config.staticAuthSecrets == ["north", "south"])
    }

    @Test func someAuthenticationModeIsRequired() {
        let error = failure("realm=example.org\n")
        #expect(error?.code == .conflict)
        #expect(
            error?.description == "no authentication mode: set 'lt-cred-mech' with 'user' entries, "
                + "'use-auth-secret' with 'static-auth-secret', or 'no-auth'")
    }

    @Test func staticUsersAloneImplyLongTermCredentials() throws {
        let result = try load("user=alice:secret\n")
        #expect(result.configuration.ltCredMech)
        #expect(result.warnings.isEmpty)
    }

    @Test func longTermCredentialsWithoutUsersWarn() throws {
        let result = try load("lt-cred-mech\n")
        #expect(
            result.warnings == [
                "conf/relayd.conf:1: key 'lt-cred-mech': no 'user' entries, so no request can authenticate"
            ])
    }

    @Test func longTermCredentialsAndRESTSecretsMayCombine() throws {
        let config = try load("lt-cred-mech\nuse-auth-secret\nstatic-auth-secret=north\nuser=alice:pw\n").configuration
        #expect(config.ltCredMech && config.useAuthSecret)
    }

    @Test(arguments: [
        (
            "no-auth\nlt-cred-mech\nuser=a:b\n",
            "conf/relayd.conf:1: key 'no-auth': cannot be combined with 'lt-cred-mech'"
        ),
        (
            "use-auth-secret\nstatic-auth-secret=s\nno-auth\n",
            "conf/relayd.conf:3: key 'no-auth': cannot be combined with 'use-auth-secret'"
        ),
        ("no-auth\nstun-only\nno-stun\n", "conf/relayd.conf:2: key 'stun-only': cannot be combined with 'no-stun'"),
        ("no-auth\nno-udp\nno-tcp\nno-tls\n", "'no-udp', 'no-tcp' and 'no-tls' together leave no listener"),
        (
            "no-auth\ncredential-ttl=700000\n",
            "conf/relayd.conf:2: key 'credential-ttl': credential-ttl 700000 is greater than credential-max-ttl 604800"
        ),
        (
            "user=alice:one\nuser=bob:x\nuser=alice:two\nuser=carol:y\n",
            "conf/relayd.conf:3: key 'user': user 'alice' is defined twice"
        ),
        (
            "no-auth\napi-key=ops:a\napi-key=ops:b\n",
            "conf/relayd.conf:3: key 'api-key': API key name 'ops' is defined twice"
        ),
        (
            "no-auth\nexternal-ip=203.0.113.1\nexternal-ip=198.51.100.1/10.0.0.1\nexternal-ip=203.0.113.2\n",
            "conf/relayd.conf:4: key 'external-ip': several IPv4 entries without a private address; use 'public/private'"
        ),
        (
            "no-auth\nrfc5780\ntls-listening-port=3479\n",
            "conf/relayd.conf:2: key 'rfc5780': the second listening port 3479 (listening-port + 1) is taken by "
                + "tls-listening-port; set alt-listening-port"
        ),
    ])
    func contradictionsAreConflicts(text: String, message: String) {
        let error = failure(text)
        #expect(error?.code == .conflict)
        #expect(error?.description == message)
    }

    @Test func externalIPsOfEachFamilyMayStandAlone() throws {
        let config = try load("no-auth\nexternal-ip=203.0.113.1\nexternal-ip=2001:db8::1\n").configuration
        #expect(config.externalIPs.map(\.publicIP) == [IPAddress("203.0.113.1")!, IPAddress("2001:db8::1")!])
        #expect(config.externalIPs.allSatisfy { $0.privateIP == nil })
    }

    @Test func usersAreIgnoredWithNoAuthAndSaySo() throws {
        let result = try load("no-auth\nuser=alice:pw\n")
        #expect(result.warnings == ["conf/relayd.conf:2: key 'user': ignored because 'no-auth' is set"])
    }

    @Test func commandLineCanResolveAFileConflict() throws {
        let config = try load("no-auth\nmin-port=60000\nmax-port=50000\n", ["--max-port=65000"]).configuration
        #expect(config.minPort == 60000 && config.maxPort == 65000)
    }
}
