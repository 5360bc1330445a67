import StunCodec

/// The algorithms an allocation's client authenticated with (RFC 8489 §9.2): the password
/// algorithm its long-term key was derived with (MD5, or SHA-256 from PASSWORD-ALGORITHM), and the
/// integrity attribute its Allocate carried (MESSAGE-INTEGRITY, HMAC-SHA1, or
/// MESSAGE-INTEGRITY-SHA256). For the metrics and the session log lines.
public struct CredentialAlgorithms: Sendable, Hashable {
    public var passwordAlgorithm: PasswordAlgorithm = .md5
    public var integritySHA256 = false

    public init(passwordAlgorithm: PasswordAlgorithm = .md5, integritySHA256: Bool = false) {
        self.passwordAlgorithm = passwordAlgorithm
        self.integritySHA256 = integritySHA256
    }

    /// `md5` or `sha256`.
    public var passwordLabel: String { passwordAlgorithm == .sha256 ? "sha256" : "md5" }
    /// `sha1` (MESSAGE-INTEGRITY) or `sha256` (MESSAGE-INTEGRITY-SHA256).
    public var integrityLabel: String { integritySHA256 ? "sha256" : "sha1" }

    /// Position among `all`, for counters.
    public var index: Int { (passwordAlgorithm == .sha256 ? 2 : 0) + (integritySHA256 ? 1 : 0) }

    /// Every combination, in `index` order.
    public static let all: [CredentialAlgorithms] = [
        .init(passwordAlgorithm: .md5, integritySHA256: false), .init(passwordAlgorithm: .md5, integritySHA256: true),
        .init(passwordAlgorithm: .sha256, integritySHA256: false), .init(passwordAlgorithm: .sha256, integritySHA256: true),
    ]
}
