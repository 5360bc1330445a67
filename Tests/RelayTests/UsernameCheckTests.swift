import Relay
import RelayCore
import StunCodec
import Testing

/// USERNAME must be OpaqueString UTF-8 of fewer than 509 bytes (RFC 8489 §14.3; RFC 8265 §4.2,
/// whose FreeformClass disallows controls, default-ignorables, noncharacters, unassigned code
/// points and old Hangul jamo, RFC 8264 §4.3).
@Suite struct UsernameCheckTests {
    @Test(
        "Names a client may send are accepted as they are",
        arguments: ["alice", "1795487209:probe", "4102444800:ali ce", "ünïcödé", "日本語ユーザー", String(repeating: "a", count: 508)])
    func accepted(name: String) {
        #expect(UsernameCheck.validate(Array(name.utf8)) == .success(name))
    }

    @Test(
        "Controls, format characters, separators, private use, ignorables, noncharacters, unassigned and jamo are refused",
        arguments: [
            ("1795487209:probe\r\nFAKE LOG LINE %n%s", 0x0D), ("a\u{0}b", 0x00), ("tab\there", 0x09), ("del\u{7F}", 0x7F),
            ("c1\u{85}", 0x85), ("soft\u{AD}hyphen", 0xAD), ("zw\u{200B}sp", 0x200B), ("non\u{FFFF}", 0xFFFF),
            ("jamo\u{1100}", 0x1100), ("unassigned\u{0378}", 0x0378), ("line\u{2028}sep", 0x2028),
            ("para\u{2029}", 0x2029), ("rlo\u{202E}txt", 0x202E), ("private\u{E000}", 0xE000),
        ] as [(String, UInt32)])
    func disallowed(name: String, scalar: UInt32) {
        #expect(UsernameCheck.validate(Array(name.utf8)) == .failure(.disallowed(Unicode.Scalar(scalar)!)))
    }

    @Test("509 bytes and more are too long; RFC 8489 §14.3 allows fewer than 509")
    func length() {
        #expect(UsernameCheck.validate(Array(repeating: UInt8(ascii: "a"), count: 509)) == .failure(.tooLong))
        #expect(UsernameCheck.validate(Array(repeating: UInt8(ascii: "a"), count: 600)) == .failure(.tooLong))
        // 254 two-byte characters are 508 bytes: the bound is in bytes, not characters.
        #expect(UsernameCheck.validate(Array(String(repeating: "é", count: 254).utf8)).isSuccess)
        #expect(UsernameCheck.validate(Array(String(repeating: "é", count: 255).utf8)) == .failure(.tooLong))
    }

    @Test("Empty and ill-formed UTF-8 are refused", arguments: [[], [0xC3, 0x28], [0xFF], [0x61, 0xED, 0xA0, 0x80]] as [[UInt8]])
    func malformed(bytes: [UInt8]) {
        #expect(UsernameCheck.validate(bytes) == .failure(bytes.isEmpty ? .empty : .illFormedUTF8))
    }

    @Test("The reason names the code point without printing it")
    func description() {
        #expect(UsernameCheck.validate("a\r\nb")?.description == "contains U+000D, which OpaqueString disallows")
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
