import Foundation
import Relay
import StunCodec
import Testing

/// The same keys as long options, coturn's short options, and the command line over the file.
@Suite struct ConfigCommandLineTests {
    private let file = "conf/relayd.conf"

    private func load(_ text: String, _ arguments: [String]) throws -> RelayConfiguration {
        try RelayConfiguration.load(fileText: text, fileName: file, arguments: arguments).configuration
    }

    @Test func longOptionForms() throws {
        let parsed = try ConfigCommandLine.parse([
            "--listening-port=3479", "--realm", "example.org", "--verbose", "--no-udp=false", "--software-attribute",
        ])
        #expect(
            parsed.entries == [
                ConfigEntry(key: "listening-port", value: "3479", source: .commandLine),
                ConfigEntry(key: "realm", value: "example.org", source: .commandLine),
                ConfigEntry(key: "verbose", value: nil, source: .commandLine),
                ConfigEntry(key: "no-udp", value: "false", source: .commandLine),
                ConfigEntry(key: "software-attribute", value: nil, source: .commandLine),
            ])
        #expect(parsed.configFile == nil)
        #expect(!parsed.noConfigFile)
    }

    @Test func shortOptionsMapToLongKeys() throws {
        let parsed = try ConfigCommandLine.parse([
            "-c", "conf/relayd.conf", "-p", "3479", "-L", "127.0.0.1", "-E", "10.0.0.1", "-X", "203.0.113.1",
            "-r", "example.org", "-v", "-p3480",
        ])
        #expect(parsed.configFile == "conf/relayd.conf")
        #expect(
            parsed.entries.map(\.key) == [
                "listening-port", "listening-ip", "relay-ip", "external-ip", "realm", "verbose", "listening-port",
            ])
        #expect(
            parsed.entries.map(\.value) == ["3479", "127.0.0.1", "10.0.0.1", "203.0.113.1", "example.org", nil, "3480"])
    }

    @Test(arguments: [["--config", "a.conf"], ["--config=a.conf"], ["-c", "a.conf"], ["-ca.conf"]])
    func configFileOption(arguments: [String]) throws {
        #expect(try ConfigCommandLine.parse(arguments).configFile == "a.conf")
    }

    @Test func noConfigFileOption() throws {
        let parsed = try ConfigCommandLine.parse(["-n", "--no-auth"])
        #expect(parsed.noConfigFile)
        let result = try RelayConfiguration.load(
            fileText: "bogus-key\n", fileName: file, arguments: ["-n", "--no-auth"])
        #expect(result.configFile == nil)
        #expect(result.configuration.noAuth)
    }

    @Test(arguments: [
        (["--foo=bar"], ConfigError.Code.unknownKey, "command line: unknown key 'foo'"),
        (["--foo"], .unknownKey, "command line: unknown key 'foo'"),
        (["-h"], .unknownKey, "command line: unknown option '-h'"),
        (["-vx"], .unknownKey, "command line: unknown option '-vx'"),
        (
            ["--realm"], .missingValue,
            "command line: key 'realm': missing value, expected a non-empty value of at most 127 characters"
        ),
        (["-p"], .missingValue, "command line: key 'listening-port': missing value, expected a port number 1-65535"),
        (["-c"], .missingValue, "command line: key '-c': missing value, expected a file path"),
        (["--config"], .missingValue, "command line: key 'config': missing value, expected a file path"),
        (["realm"], .malformedEntry, "command line: unexpected argument 'realm'"),
        (["--"], .malformedEntry, "command line: unexpected argument '--'"),
        (["-"], .malformedEntry, "command line: unexpected argument '-'"),
        (["--verbose", "yes"], .malformedEntry, "command line: unexpected argument 'yes'"),
        (["-n", "-c", "a.conf"], .conflict, "command line: '-n' (no configuration file) contradicts '-c'"),
    ])
    func badArguments(arguments: [String], code: ConfigError.Code, message: String) {
        let error = #expect(throws: ConfigError.self) { try ConfigCommandLine.parse(arguments) }
        #expect(error?.code == code)
        #expect(error?.description == message)
    }

    @Test func commandLineValueErrorsSayCommandLine() {
        let error = #expect(throws: ConfigError.self) { try load("no-auth\n", ["--min-port=abc"]) }
        #expect(error?.description == "command line: key 'min-port': expected a port number 1-65535, got 'abc'")
    }

    @Test func singleValuedKeyOnTheCommandLineWins() throws {
        let config = try load(
            "no-auth\nlistening-port=3478\nrealm=file.example\n", ["--listening-port=3479", "-r", "cli.example"])
        #expect(config.listeningPort == 3479)
        #expect(config.realm == "cli.example")
    }

    @Test func repeatableKeyOnTheCommandLineReplacesTheFileList() throws {
        let text = "no-auth\nlistening-ip=10.0.0.1\nlistening-ip=10.0.0.2\nrelay-ip=10.0.0.3\n"
        let config = try load(text, ["-L", "127.0.0.1", "--listening-ip=::1"])
        #expect(config.listeningIPs == [IPAddress("127.0.0.1")!, IPAddress("::1")!])
        #expect(config.relayIPs == [IPAddress("10.0.0.3")!])
    }

    @Test func secretsGivenOnTheCommandLineReplaceTheFileSecrets() throws {
        let text = "use-auth-secret\nstatic-auth-secret=old1\nstatic-auth-secret=old2\n"
        #expect(try load(text, []).staticAuthSecrets == ["old1", "old2"])
        #expect(try load(text, ["--static-auth-secret=new"]).staticAuthSecrets == ["new"])
    }

    @Test func flagsCanBeTurnedOffFromTheCommandLine() throws {
        let config = try load("no-auth\nfingerprint\nno-udp\n", ["--fingerprint=false", "--no-udp=no"])
        #expect(!config.fingerprint)
        #expect(!config.noUDP)
    }

    @Test func softwareAttributePairOrderFollowsSources() throws {
        #expect(try load("no-auth\nsoftware-attribute=file\n", ["--no-software-attribute"]).softwareAttribute == nil)
        #expect(try load("no-auth\nno-software-attribute\n", ["--software-attribute=cli"]).softwareAttribute == "cli")
    }

    @Test func badValueInTheFileIsReportedEvenWhenTheCommandLineOverridesIt() {
        let error = #expect(throws: ConfigError.self) { try load("no-auth\nlistening-port=abc\n", ["-p", "3479"]) }
        #expect(
            error?.description == "conf/relayd.conf:2: key 'listening-port': expected a port number 1-65535, got 'abc'")
    }

    @Test func commandLineAloneNeedsNoFile() throws {
        let result = try RelayConfiguration.load(arguments: [
            "--listening-port=3478", "--use-auth-secret", "--static-auth-secret=s3cret",
        ])
        #expect(result.configFile == nil)
        #expect(result.configuration.useAuthSecret)
        #expect(result.configuration.staticAuthSecrets == ["s3cret"])
    }

    @Test func readsTheFileNamedByDashC() throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("relayd-config-\(UInt64.random(in: 0...UInt64.max)).conf").path
        try "lt-cred-mech\nuser=alice:secret\nrealm=disk.example\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let result = try RelayConfiguration.load(arguments: ["-c", path, "--listening-port=3479"])
        #expect(result.configFile == path)
        #expect(result.configuration.realm == "disk.example")
        #expect(result.configuration.listeningPort == 3479)
        #expect(result.configuration.users.map(\.name) == ["alice"])
    }

    @Test func unimplementedKeyOnTheCommandLineWarnsAndSkipsItsValue() throws {
        let result = try RelayConfiguration.load(
            fileText: "no-auth\n", fileName: file, arguments: ["--mysql-userdb", "host=db", "-p", "3479"])
        #expect(result.configuration.listeningPort == 3479)
        #expect(result.warnings.count == 1)
        #expect(
            result.warnings.first?.hasPrefix(
                "command line: key 'mysql-userdb' is a coturn option relayd does not implement; ignored") == true)
    }
}
