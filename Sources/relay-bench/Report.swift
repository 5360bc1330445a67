import Glibc

/// The run's results: an ordered list of fields printed as one JSON line, plus a human line.
struct Report {
    private var fields: [(String, String)] = []

    mutating func set(_ key: String, _ value: String) { fields.append((key, quote(value))) }
    mutating func set(_ key: String, _ value: Int) { fields.append((key, String(value))) }
    mutating func set(_ key: String, _ value: UInt64) { fields.append((key, String(value))) }
    mutating func set(_ key: String, _ value: Double) {
        fields.append((key, value.isFinite ? String(Double((value * 1000).rounded()) / 1000) : "null"))
    }
    /// A value that is already JSON (an object).
    mutating func setRaw(_ key: String, _ json: String) { fields.append((key, json)) }

    /// The JSON line.
    var json: String { "{" + fields.map { "\(quote($0.0)):\($0.1)" }.joined(separator: ",") + "}" }

    private func quote(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }

    /// Prints the JSON line then the human line on stdout.
    func emit(human: String) {
        Output.out(json)
        Output.out("relay-bench: " + human)
    }

    /// A progress or warning note on stderr.
    static func note(_ text: String) {
        Output.err("relay-bench: \(text)")
    }
}

/// Short number formatting for the human line.
func fmt(_ value: Double, _ digits: Int = 1) -> String {
    guard value.isFinite else { return "-" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let r = (value * scale).rounded() / scale
    return digits == 0 ? String(Int(r)) : String(r)
}
