import Logging

/// One log record as a single line of JSON (`log-format=json`): `ts` (RFC 3339, UTC, milliseconds),
/// `level`, `msg`, `event` when the metadata has one, then every other metadata key in sorted
/// order, each value as a string. The line is pure ASCII: control characters, quotes,
/// backslashes and every non-ASCII character are escaped, so it never holds a raw line break
/// and survives any log pipeline.
public enum JSONLogLine {
    /// Keys the line itself writes; metadata under one of these names is written as `meta.<key>`.
    static let reservedKeys: Set<String> = ["ts", "level", "msg", "event"]

    /// The JSON object for one record, without a trailing newline. `timestamp` is seconds since
    /// 1970-01-01T00:00:00Z.
    public static func format(
        level: Logger.Level, message: String, metadata: Logger.Metadata, timestamp: Double
    ) -> String {
        var line = "{\"ts\":"
        appendQuoted(rfc3339(timestamp), to: &line)
        line += ",\"level\":"
        appendQuoted(level.rawValue, to: &line)
        line += ",\"msg\":"
        appendQuoted(message, to: &line)
        if let event = metadata["event"] {
            line += ",\"event\":"
            appendQuoted(text(event), to: &line)
        }
        for key in metadata.keys.sorted() where key != "event" {
            line += ","
            appendQuoted(reservedKeys.contains(key) ? "meta.\(key)" : key, to: &line)
            line += ":"
            appendQuoted(text(metadata[key]!), to: &line)
        }
        line += "}"
        return line
    }

    /// A metadata value as text: strings as they are, lists and dictionaries as swift-log prints them.
    static func text(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let s): return s
        case .stringConvertible(let c): return c.description
        default: return value.description
        }
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ` for `timestamp` seconds since the Unix epoch (proleptic
    /// Gregorian calendar, UTC).
    public static func rfc3339(_ timestamp: Double) -> String {
        let totalMilliseconds = Int64((timestamp * 1000).rounded(.down))
        let (seconds, milliseconds) = floorDivide(totalMilliseconds, 1000)
        let (days, secondOfDay) = floorDivide(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(secondOfDay / 3600, 2) + ":"
            + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2) + "." + pad(milliseconds, 3) + "Z"
    }

    /// Quotient and non-negative remainder, so times before 1970 come out right too.
    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let r = a % b
        return r < 0 ? (a / b - 1, r + b) : (a / b, r)
    }

    /// Year, month (1-12) and day (1-31) of the day `days` after 1970-01-01, counted in 400-year
    /// eras of 146,097 days that begin on 1 March (so the leap day ends each era's year).
    private static func civilDate(daysSinceEpoch days: Int64) -> (Int64, Int64, Int64) {
        let shifted = days + 719_468  // days from 0000-03-01 to 1970-01-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // 0 = March
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// `value` in decimal, zero-padded on the left to `width` digits.
    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// Appends `s` as a JSON string literal (RFC 8259 §7) in ASCII: `"` and `\` escaped, control
    /// characters and DEL as short escapes or `\u00XX`, non-ASCII as `\uXXXX` (surrogate pairs
    /// above U+FFFF).
    static func appendQuoted(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                let value = scalar.value
                if value >= 0x20 && value < 0x7F {
                    out.unicodeScalars.append(scalar)
                } else if value < 0x1_0000 {
                    appendEscape(UInt16(value), to: &out)
                } else {
                    let offset = value - 0x1_0000
                    appendEscape(UInt16(0xD800 + (offset >> 10)), to: &out)
                    appendEscape(UInt16(0xDC00 + (offset & 0x3FF)), to: &out)
                }
            }
        }
        out += "\""
    }

    /// `\uXXXX` with lowercase hex.
    private static func appendEscape(_ unit: UInt16, to out: inout String) {
        let hex = String(unit, radix: 16)
        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    }
}
