import Relay
import StunCodec
import Testing

/// The `static-auth-secret` shipped in conf/relayd.conf is public: a warning on loopback, an
/// error naming file, line and key on any other listener.
@Suite struct ConfigPlaceholderSecretTests {
    private let file = "conf/relayd.conf"
    private let secretLine = "use-auth-secret\nstatic-auth-secret=\(RelayConfiguration.placeholderAuthSecret)\n"

    @Test("On loopback listeners only: loads, with a warning naming the line")
    func loopbackWarns() throws {
        let result = try RelayConfiguration.load(
            fileText: "realm=x\n" + secretLine + "listening-ip=127.0.0.1\nlistening-ip=::1\n", fileName: file)
        let warning = try #require(result.warnings.first { $0.contains("placeholder") })
        #expect(warning.hasPrefix("conf/relayd.conf:3: key 'static-auth-secret': is the placeholder"))
        #expect(warning.contains("refused on any other listener"))
    }

    @Test(
        "Beyond loopback, or on every address: refused, naming file, line and key",
        arguments: [["listening-ip=0.0.0.0"], ["listening-ip=127.0.0.1", "listening-ip=192.0.2.10"], []])
    func exposedIsRefused(listeners: [String]) {
        let text = "realm=x\n" + secretLine + listeners.map { $0 + "\n" }.joined()
        let error = #expect(throws: ConfigError.self) { try RelayConfiguration.load(fileText: text, fileName: file) }
        #expect(error?.code == .conflict)
        #expect(error?.key == "static-auth-secret")
        #expect(error?.description.hasPrefix("conf/relayd.conf:3: key 'static-auth-secret': is the placeholder") == true)
    }

    @Test("Also as a second, rotated secret; another secret alone is silent")
    func anyPositionAndOtherSecrets() throws {
        let rotated = "realm=x\nuse-auth-secret\nstatic-auth-secret=a-real-one\nstatic-auth-secret=\(RelayConfiguration.placeholderAuthSecret)\n"
        let error = #expect(throws: ConfigError.self) {
            try RelayConfiguration.load(fileText: rotated + "listening-ip=0.0.0.0\n", fileName: file)
        }
        #expect(error?.description.hasPrefix("conf/relayd.conf:4:") == true)
        let own = try RelayConfiguration.load(
            fileText: "realm=x\nuse-auth-secret\nstatic-auth-secret=a-real-one\nlistening-ip=0.0.0.0\n", fileName: file)
        #expect(!own.warnings.contains { $0.contains("placeholder") })
    }
}
