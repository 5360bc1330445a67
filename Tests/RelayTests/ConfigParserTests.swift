import Relay
import Testing

/// coturn `turnserver.conf` syntax: `key=value`, `key value`, bare flags, comments, quotes.
@Suite struct ConfigParserTests {
    private let file = "conf/relayd.conf"

    private func entries(_ text: String) throws -> [ConfigEntry] {
        try ConfigFileParser.parse(text, fileName: file)
    }

    private func single(_ line: String) throws -> ConfigEntry {
        let parsed = try entries(line)
        try #require(parsed.count == 1)
        return parsed[0]
    }

    @Test(arguments: [
        ("realm=example.org", "realm", "example.org"),
        ("realm = example.org", "realm", "example.org"),
        ("realm  =  example.org  ", "realm", "example.org"),
        ("realm example.org", "realm", "example.org"),
        ("realm\texample.org", "realm", "example.org"),
        ("  realm=example.org", "realm", "example.org"),
        ("static-auth-secret=ab#cd", "static-auth-secret", "ab#cd"),
        ("static-auth-secret=a=b", "static-auth-secret", "a=b"),
        ("realm=example.org # the realm", "realm", "example.org"),
        ("realm=example.org\t# the realm", "realm", "example.org"),
        ("realm=\"my realm\"", "realm", "my realm"),
        ("realm = \"my # realm\"  # comment", "realm", "my # realm"),
        ("realm=\"\"", "realm", ""),
        ("realm=", "realm", ""),
        ("cipher-list=\"ECDHE+AESGCM:!aNULL\"", "cipher-list", "ECDHE+AESGCM:!aNULL"),
        ("realm=#notacomment", "realm", "#notacomment"),
        ("realm=example.org\r", "realm", "example.org"),
    ])
    func splitsKeyAndValue(line: String, key: String, value: String) throws {
        let entry = try single(line)
        #expect(entry.key == key)
        #expect(entry.value == value)
        #expect(entry.source == .file(path: file, line: 1))
    }

    @Test(arguments: ["verbose", "  verbose  ", "verbose # say more", "verbose\t#x"])
    func bareKeyIsAFlagWithoutValue(line: String) throws {
        let entry = try single(line)
        #expect(entry.key == "verbose")
        #expect(entry.value == nil)
    }

    @Test func skipsCommentsAndBlankLinesAndCountsEveryLine() throws {
        let text = """
            # relayd test configuration

            listening-port=3478
               # indented comment
            \t
            verbose
            #realm=commented.out
            realm=example.org
            """
        let parsed = try entries(text)
        #expect(parsed.map(\.key) == ["listening-port", "verbose", "realm"])
        #expect(parsed.map(\.source) == [3, 6, 8].map { .file(path: file, line: $0) })
    }

    @Test func crlfLineEndingsAndByteOrderMark() throws {
        let parsed = try entries("\u{FEFF}realm=a\r\n\r\nverbose\r\nmin-port=5\r\n")
        #expect(parsed.map(\.key) == ["realm", "verbose", "min-port"])
        #expect(parsed.map(\.value) == ["a", nil, "5"])
        #expect(parsed.map(\.source) == [1, 3, 4].map { .file(path: file, line: $0) })
    }

    @Test func repeatedKeysAreAllKept() throws {
        let parsed = try entries("static-auth-secret=one\nstatic-auth-secret=two\n")
        #expect(parsed.map(\.value) == ["one", "two"])
    }

    @Test(arguments: [
        ("realm=\"unterminated", "conf/relayd.conf:1: key 'realm': value has no closing quote"),
        ("realm=\"a\"b", "conf/relayd.conf:1: key 'realm': unexpected text after the closing quote"),
        ("realm=\"a\"#b", "conf/relayd.conf:1: key 'realm': unexpected text after the closing quote"),
        ("=value", "conf/relayd.conf:1: line has a value but no key"),
    ])
    func malformedLinesNameFileAndLine(line: String, message: String) {
        let error = #expect(throws: ConfigError.self) { try entries(line) }
        #expect(error?.code == .malformedEntry)
        #expect(error?.description == message)
    }

    @Test func unknownKeyNamesFileLineAndKey() {
        let text = Array(repeating: "# comment", count: 11).joined(separator: "\n") + "\nfoo=bar\nno-auth\n"
        let error = #expect(throws: ConfigError.self) {
            try RelayConfiguration.load(fileText: text, fileName: file)
        }
        #expect(error?.code == .unknownKey)
        #expect(error?.source == .file(path: file, line: 12))
        #expect(error?.description == "conf/relayd.conf:12: unknown key 'foo'")
    }

    @Test func keysAreCaseSensitiveAsInCoturn() {
        let error = #expect(throws: ConfigError.self) {
            try RelayConfiguration.load(fileText: "no-auth\nREALM=x\n", fileName: file)
        }
        #expect(error?.description == "conf/relayd.conf:2: unknown key 'REALM'")
    }

    @Test func quotedValuesReachTheConfiguration() throws {
        let result = try RelayConfiguration.load(
            fileText: "no-auth\nrealm = \"example org\" # spaced\npidfile=\"/run/relayd.pid\"\n", fileName: file)
        #expect(result.configuration.realm == "example org")
        #expect(result.configuration.pidfile == "/run/relayd.pid")
    }

    @Test func unreadableFileIsNamed() {
        let path = "/nonexistent/relayd-\(UInt64.random(in: 0...UInt64.max)).conf"
        let error = #expect(throws: ConfigError.self) { try RelayConfiguration.load(arguments: ["-c", path]) }
        #expect(error?.code == .unreadableFile)
        #expect(error?.description == "\(path): cannot read configuration file (no such file)")
    }

    @Test func directoryIsNotAConfigurationFile() {
        let error = #expect(throws: ConfigError.self) { try RelayConfiguration.load(arguments: ["-c", "/"]) }
        #expect(error?.description == "/: cannot read configuration file (is a directory)")
    }
}
