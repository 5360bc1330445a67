import StunCodec

/// Mints coturn-compatible TURN REST credentials (docs/compatibility.md): username `<now+ttl><sep><user>`,
/// password base64(HMAC-SHA1(secret, username)) under the first `static-auth-secret`, so relayd
/// itself and any coturn sharing the secret accept them until the expiry passes.
public struct CredentialService: Sendable {
    /// The first `static-auth-secret` when `use-auth-secret` is on; nil means the service is unavailable.
    let secret: String?
    public let separator: String
    public let defaultTTL: Int
    public let maxTTL: Int
    public let uris: ICEServerURIs

    public init(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress] = []) {
        secret = c.useAuthSecret ? c.staticAuthSecrets.first : nil
        separator = c.restAPISeparator
        defaultTTL = c.credentialTTL
        maxTTL = c.credentialMaxTTL
        uris = ICEServerURIs(configuration: c, interfaceAddresses: interfaceAddresses)
    }

    /// A service with no secret: every request gets 503.
    public static let unavailable = CredentialService(configuration: RelayConfiguration())

    /// False without `use-auth-secret` and a `static-auth-secret`: requests get 503.
    public var isAvailable: Bool { secret != nil }

    /// Credentials for `request` at unix time `now`; nil when the service is unavailable. In a
    /// cluster (`fleet` read from Redis), the URIs are the best nodes' (docs/cluster.md), in
    /// order; alone, or with Redis away, this node's own.
    public func issue(_ request: CredentialRequest, now: Int64, fleet: ClusterFleet? = nil) -> IssuedCredentials? {
        guard let secret else { return nil }
        let ttl = min(request.ttl ?? defaultTTL, maxTTL)
        let username = "\(now + Int64(ttl))\(separator)\(request.user)"
        var chosen = uris
        if let fleet {
            let best = fleet.best(count: request.nodes ?? CredentialRequest.defaultNodes, preferring: request.labels)
            if !best.isEmpty {
                chosen = ICEServerURIs(stun: best.flatMap(\.stunURIs), turn: best.flatMap(\.turnURIs))
            }
        }
        return IssuedCredentials(
            username: username, password: KeyDerivation.restPassword(secret: secret, username: username), ttl: ttl,
            uris: chosen)
    }
}

/// One set of minted credentials and the servers they are for, in the three response shapes.
public struct IssuedCredentials: Sendable, Equatable {
    public var username: String
    public var password: String
    public var ttl: Int
    public var uris: ICEServerURIs

    /// The response body in `format`, keys in the documented order.
    public func json(_ format: CredentialRequest.Format) -> String {
        var w = JSONWriter()
        switch format {
        case .rest:
            w.object { o in
                o.field("username", username)
                o.field("password", password)
                o.field("ttl", ttl)
                o.field("uris", strings: uris.turn)
            }
        case .iceServers, .webrtcKit:
            let urlsKey = format == .iceServers ? "urls" : "urlStrings"
            w.object { o in
                o.key("iceServers")
                o.array { a in
                    if !uris.stun.isEmpty {
                        a.object { s in s.field(urlsKey, strings: uris.stun) }
                    }
                    if !uris.turn.isEmpty {
                        a.object { t in
                            t.field(urlsKey, strings: uris.turn)
                            t.field("username", username)
                            t.field("credential", password)
                        }
                    }
                }
            }
        }
        return w.text
    }
}
