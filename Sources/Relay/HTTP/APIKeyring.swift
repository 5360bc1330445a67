import RelayCore
import StunCodec

/// The bearer tokens the credential service accepts (`api-key=name:token`). A presented token is
/// compared with every configured one through SHA-256 digests in constant time, so neither the
/// position of the first differing byte nor the tokens' lengths show in the timing.
public struct APIKeyring: Sendable {
    struct Entry: Sendable {
        var name: String
        var digest: [UInt8]
        var scope: RelayConfiguration.APIKey.Scope
        var tenant: String?
    }

    /// A key that matched: its name, what it may do, and its tenant (nil: the operator's).
    public struct Match: Sendable, Equatable {
        public var name: String
        public var scope: RelayConfiguration.APIKey.Scope
        public var tenant: String?
    }

    let entries: [Entry]

    public init(keys: [RelayConfiguration.APIKey]) {
        entries = keys.map {
            Entry(name: $0.name, digest: Self.digest(Substring($0.token)), scope: $0.scope, tenant: $0.tenant)
        }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The name of the key whose token `authorization` carries (`Bearer <token>`), or nil.
    public func authenticate(authorization: String?) -> String? { key(authorization: authorization)?.name }

    /// The name of the key with this token, or nil; every key is compared, matched or not.
    public func authenticate(token: Substring) -> String? { key(token: token)?.name }

    /// The key whose token `authorization` carries, or nil.
    public func key(authorization: String?) -> Match? {
        guard let authorization, let token = Self.bearerToken(authorization) else { return nil }
        return key(token: token)
    }

    /// The key with this token, or nil; every key is compared.
    public func key(token: Substring) -> Match? {
        entry(digest: Self.digest(token)).map { Match(name: $0.name, scope: $0.scope, tenant: $0.tenant) }
    }

    /// The SHA-256 of a token, as the keyring keeps it.
    public static func digest(_ token: Substring) -> [UInt8] { DigestAlgorithm.sha256.hash(Array(token.utf8)) }

    /// The scope of the key whose token has this SHA-256, nil when no key has it (any more: a
    /// reload replaced or removed it).
    public func scope(digest: [UInt8]) -> RelayConfiguration.APIKey.Scope? { entry(digest: digest)?.scope }

    /// The key whose token has this SHA-256; every key is compared, matched or not.
    private func entry(digest: [UInt8]) -> Entry? {
        var match: Entry? = nil
        for entry in entries where constantTimeEqual(entry.digest, digest) && match == nil { match = entry }
        return match
    }

    /// The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1; the scheme is
    /// case-insensitive), nil for another scheme or an empty token.
    public static func bearerToken(_ header: String) -> Substring? {
        let trimmed = header.drop { $0 == " " || $0 == "\t" }
        guard let space = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" }),
            trimmed[..<space].lowercased() == "bearer"
        else { return nil }
        var token = trimmed[space...].drop { $0 == " " || $0 == "\t" }
        while let last = token.last, last == " " || last == "\t" { token = token.dropLast() }
        return token.isEmpty ? nil : token
    }
}
