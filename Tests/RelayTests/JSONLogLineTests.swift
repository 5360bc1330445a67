import Foundation
import Logging
import Relay
import Testing

/// `log-format=json`: one ASCII JSON object per line that any JSON parser reads back.
@Suite struct JSONLogLineTests {
    /// Parses `line` with Foundation's JSON parser as an object of strings.
    private func parsed(_ line: String) throws -> [String: String] {
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(object as? [String: String])
    }

    @Test("ts, level, msg and event come first, then the other metadata in key order")
    func fieldOrder() {
        let line = JSONLogLine.format(
            level: .info, message: "allocation created",
            metadata: ["user": "alice", "event": "allocation_created", "five_tuple": "udp 1.2.3.4:5"],
            timestamp: 0)
        #expect(
            line == #"{"ts":"1970-01-01T00:00:00.000Z","level":"info","msg":"allocation created","#
                + #""event":"allocation_created","five_tuple":"udp 1.2.3.4:5","user":"alice"}"#)
    }

    @Test("A record without event metadata has no event field")
    func noEvent() throws {
        let fields = try parsed(JSONLogLine.format(level: .warning, message: "m", metadata: [:], timestamp: 0))
        #expect(fields == ["ts": "1970-01-01T00:00:00.000Z", "level": "warning", "msg": "m"])
    }

    @Test(
        "Timestamps are RFC 3339 UTC with milliseconds",
        arguments: [
            (0.0, "1970-01-01T00:00:00.000Z"),
            (951_782_400.5, "2000-02-29T00:00:00.500Z"),
            (1_795_013_087.123_9, "2026-11-18T14:44:47.123Z"),
            (4_107_542_399.999, "2100-02-28T23:59:59.999Z"),
            (4_107_542_400, "2100-03-01T00:00:00.000Z"),
            (-0.001, "1969-12-31T23:59:59.999Z"),
        ])
    func timestamps(seconds: Double, text: String) {
        #expect(JSONLogLine.rfc3339(seconds) == text)
    }

    @Test("Quotes, backslashes, control characters and non-ASCII are escaped; no raw line break")
    func escaping() throws {
        let nasty = "a\"b\\c\nd\re\tf\u{0}g\u{1F}h\u{7F}i é 💡 \u{2028}"
        let line = JSONLogLine.format(
            level: .error, message: nasty, metadata: ["event": "x\ny", "k\"ey": .string(nasty)], timestamp: 0)
        #expect(!line.contains("\n") && !line.contains("\r"))
        #expect(line.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "the line is printable ASCII only")
        #expect(line.contains(#"a\"b\\c\nd\re\tf\u0000g\u001fh\u007fi \u00e9 \ud83d\udca1 \u2028"#))
        let fields = try parsed(line)
        #expect(fields["msg"] == nasty)
        #expect(fields["event"] == "x\ny")
        #expect(fields["k\"ey"] == nasty)
    }

    @Test("Metadata named like a line field is kept under meta.<key>")
    func reservedKeys() throws {
        let fields = try parsed(
            JSONLogLine.format(level: .info, message: "m", metadata: ["msg": "other", "ts": "t"], timestamp: 0))
        #expect(fields["msg"] == "m")
        #expect(fields["meta.msg"] == "other")
        #expect(fields["meta.ts"] == "t")
    }

    @Test("Non-string metadata values are written as their text")
    func structuredValues() throws {
        let fields = try parsed(
            JSONLogLine.format(
                level: .debug, message: "m",
                metadata: ["list": ["a", "b"], "number": .stringConvertible(42)], timestamp: 0))
        #expect(fields["number"] == "42")
        #expect(fields["list"] == #"["a", "b"]"#)
    }
}
