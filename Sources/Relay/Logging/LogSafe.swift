/// Makes client-supplied text safe for a log line: control characters and non-ASCII are escaped.
public enum LogSafe {
    public static func text(_ s: some StringProtocol) -> String {
        var out = ""
        for scalar in s.unicodeScalars.prefix(128) {
            if scalar.value >= 0x20 && scalar.value < 0x7F && scalar != "\\" {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return out
    }
}
