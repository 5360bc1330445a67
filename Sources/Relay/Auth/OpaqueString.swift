import Foundation

/// Password preparation before long-term key derivation (RFC 8489 §9.2.2 uses the
/// OpaqueString profile of RFC 8265 §4.2).
///
/// ASCII passwords (every coturn REST password, being base64) pass through untouched. Others
/// are prepared so that both RFC 8265 and the SASLprep-era vectors of RFC 5769 §2.4 agree:
/// non-ASCII spaces become U+0020, default-ignorable code points (e.g. U+00AD SOFT HYPHEN)
/// are removed, and the result is normalized with compatibility mapping (NFKC).
public enum OpaqueString {
    public static func prepare(_ password: String) -> String {
        if password.utf8.allSatisfy({ $0 < 0x80 }) { return password }
        var scalars = String.UnicodeScalarView()
        for s in password.unicodeScalars {
            if s.properties.isDefaultIgnorableCodePoint { continue }
            if s.value >= 0x80 && s.properties.generalCategory == .spaceSeparator {
                scalars.append(" ")
            } else {
                scalars.append(s)
            }
        }
        return String(scalars).precomposedStringWithCompatibilityMapping
    }
}
