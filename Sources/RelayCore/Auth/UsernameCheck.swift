import StunCodec

/// The checks a USERNAME passes before any key is derived for it (RFC 8489 §14.3): UTF-8 of
/// fewer than 509 bytes, processed with the OpaqueString profile (RFC 8265 §4.2), whose base
/// class FreeformClass allows letters, marks, numbers, punctuation, symbols and spaces, and
/// disallows the rest: control and format characters, line and paragraph separators, private
/// use, default-ignorable code points and noncharacters, unassigned code points and old Hangul
/// jamo (RFC 8264 §4.3, §9).
/// relayd answers a request whose USERNAME fails them with 400, and refuses `user=` lines whose
/// name fails them, so no such name reaches a log line, a metric or the HTTP API.
public enum UsernameCheck {
    /// Why a username is refused.
    public enum Problem: Error, Sendable, Hashable {
        case empty
        case tooLong
        case illFormedUTF8
        /// A code point OpaqueString disallows (the first one found).
        case disallowed(Unicode.Scalar)
    }

    /// The username in `bytes` (a USERNAME attribute's value), or why it is refused.
    public static func validate(_ bytes: some Collection<UInt8>) -> Result<String, Problem> {
        guard !bytes.isEmpty else { return .failure(.empty) }
        guard bytes.count <= Username.maxBytes else { return .failure(.tooLong) }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.illFormedUTF8) }
        if let bad = firstDisallowed(in: text) { return .failure(.disallowed(bad)) }
        return .success(text)
    }

    /// The same checks for a name given as text (a `user=` line).
    public static func validate(_ name: String) -> Problem? {
        if case .failure(let problem) = validate(Array(name.utf8)) { return problem }
        return nil
    }

    /// The first code point of `text` that FreeformClass disallows, nil when there is none.
    /// Printable ASCII (most REST usernames are nothing else) is checked without a table lookup.
    public static func firstDisallowed(in text: String) -> Unicode.Scalar? {
        for scalar in text.unicodeScalars where !isAllowed(scalar) { return scalar }
        return nil
    }

    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        if v >= 0x20 && v < 0x7F { return true }
        let p = scalar.properties
        // FreeformClass's valid categories: letters, marks, numbers, punctuation, symbols and
        // spaces (Zs). Controls, format characters (bidi overrides among them), line and
        // paragraph separators, private use, surrogates and unassigned code points are not.
        switch p.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
            return false
        default: break
        }
        if p.isDefaultIgnorableCodePoint || p.isNoncharacterCodePoint { return false }
        // Conjoining jamo (Hangul_Syllable_Type L, V or T): the old Hangul jamo of RFC 8264 §9.10.
        return !(0x1100...0x11FF).contains(v) && !(0xA960...0xA97F).contains(v) && !(0xD7B0...0xD7FF).contains(v)
    }
}

extension UsernameCheck.Problem: CustomStringConvertible {
    public var description: String {
        switch self {
        case .empty: return "empty"
        case .tooLong: return "longer than \(Username.maxBytes) bytes"
        case .illFormedUTF8: return "not UTF-8"
        case .disallowed(let scalar):
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return "contains U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex), which OpaqueString disallows"
        }
    }
}
