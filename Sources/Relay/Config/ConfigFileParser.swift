/// Splits coturn `turnserver.conf` text into entries, without interpreting keys.
///
/// One entry a line: `key=value`, `key = value`, `key value` or a bare `key`. `#` starts a
/// comment at the beginning of a line or after whitespace (`secret=a#b` keeps its `#`). A value
/// in double quotes is taken verbatim up to the next `"`. Blank lines are skipped.
public enum ConfigFileParser {
    public static func parse(_ text: String, fileName: String) throws(ConfigError) -> [ConfigEntry] {
        var body = Substring(text)
        if body.unicodeScalars.first == "\u{FEFF}" { body = Substring(body.unicodeScalars.dropFirst()) }
        var entries: [ConfigEntry] = []
        let lines = body.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, line) in lines.enumerated() {
            if let entry = try parseLine(line, source: .file(path: fileName, line: index + 1)) {
                entries.append(entry)
            }
        }
        return entries
    }

    /// The entry on one line, or nil for a blank or comment line.
    static func parseLine(_ line: Substring, source: ConfigSource) throws(ConfigError) -> ConfigEntry? {
        let start = line.drop(while: \.isWhitespace)
        guard let first = start.first, first != "#" else { return nil }
        let keyEnd = start.firstIndex(where: { $0.isWhitespace || $0 == "=" }) ?? start.endIndex
        let key = String(start[..<keyEnd])
        guard !key.isEmpty else { throw .malformed("line has a value but no key", at: source) }

        var rest = start[keyEnd...].drop(while: \.isWhitespace)
        let hasEquals = rest.first == "="
        if hasEquals { rest = rest.dropFirst().drop(while: \.isWhitespace) }

        if rest.first == "\"" {
            let quoted = rest.dropFirst()
            guard let close = quoted.firstIndex(of: "\"") else {
                throw .malformed("value has no closing quote", at: source, key: key)
            }
            let after = quoted[quoted.index(after: close)...]
            let trailing = after.drop(while: \.isWhitespace)
            guard trailing.isEmpty || (trailing.first == "#" && trailing.startIndex != after.startIndex) else {
                throw .malformed("unexpected text after the closing quote", at: source, key: key)
            }
            return ConfigEntry(key: key, value: String(quoted[..<close]), source: source)
        }

        let valueEnd = commentStart(in: rest, of: line) ?? rest.endIndex
        var value = rest[..<valueEnd]
        while let last = value.last, last.isWhitespace { value = value.dropLast() }
        if value.isEmpty && !hasEquals { return ConfigEntry(key: key, value: nil, source: source) }
        return ConfigEntry(key: key, value: String(value), source: source)
    }

    /// The first `#` in `text` that follows whitespace on `line`.
    private static func commentStart(in text: Substring, of line: Substring) -> Substring.Index? {
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == "#", index > line.startIndex, line[line.index(before: index)].isWhitespace {
                return index
            }
            index = text.index(after: index)
        }
        return nil
    }
}
