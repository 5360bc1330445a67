import StunCodec

extension RelayCore {
    /// Who sent an authenticated request and the key to sign the response with.
    struct Authenticated {
        var username: String
        var key: [UInt8]
    }

    /// The long-term credential mechanism (RFC 8489 §9.2.4); on failure the answer (400, 401,
    /// 438, 441) is already queued and nil is returned. With an existing allocation the request
    /// must use its USERNAME and is checked with its stored key, so a rotated REST secret does
    /// not break refreshes of calls in progress (RFC 8656 §7.3).
    ///
    /// A challenge (401 to a request without credentials, 438) is charged to the source's
    /// `unauth-rate-limit` bucket and a failure (bad integrity, unknown or expired user) to its
    /// `auth-failure-rate-limit` bucket; a request with valid credentials is never limited and
    /// gives the source back one challenge (docs/rate-limits.md).
    func authenticate(_ message: StunMessage, origin: ClientOrigin, existing: Allocation?, now: Int64) -> Authenticated? {
        if configuration.noAuth { return Authenticated(username: "", key: []) }
        guard message.integrityOffset != nil || message.integritySHA256Offset != nil else {
            counters.auth[AuthOutcome.challenged.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .challenge, now: now)
            return nil
        }
        // A USERNAME that is not OpaqueString UTF-8 of fewer than 509 bytes (RFC 8489 §14.3), or a
        // REALM over 763 bytes (§14.9), is malformed: 400, before any key is derived or logged.
        guard let usernameAttribute = message.attribute(.username), let realm = message.attribute(.realm),
            let nonce = message.attribute(.nonce), realm.value.count <= Realm.maxDecodedBytes,
            case .success(let username) = UsernameCheck.validate(usernameAttribute.value)
        else {
            counters.auth[AuthOutcome.malformed.rawValue] += 1
            sendError(.badRequest, to: message, origin: origin, key: nil)
            return nil
        }
        guard context.nonces.check(nonce.value, client: origin.fiveTuple.client.ip, now: now) == .fresh else {
            counters.auth[AuthOutcome.staleNonce.rawValue] += 1
            sendChallenge(.staleNonce, to: message, origin: origin, charging: .challenge, now: now)
            return nil
        }
        if let existing {
            guard username == existing.username else {
                counters.auth[AuthOutcome.wrongCredentials.rawValue] += 1
                sendError(.wrongCredentials, to: message, origin: origin, key: nil)
                return nil
            }
            guard message.verifyIntegrity(key: existing.key) == .valid else {
                counters.auth[AuthOutcome.badIntegrity.rawValue] += 1
                sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, now: now)
                return nil
            }
            return authenticated(username, key: existing.key, origin: origin, now: now)
        }
        switch context.credentials.candidateKeys(for: username, now: now) {
        case .failure(let failure):
            counters.auth[(failure == .expired ? AuthOutcome.expired : .unknownUser).rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, now: now)
            return nil
        case .success(let keys):
            for key in keys where message.verifyIntegrity(key: key) == .valid {
                return authenticated(username, key: key, origin: origin, now: now)
            }
            counters.auth[AuthOutcome.badIntegrity.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, now: now)
            return nil
        }
    }

    /// A request that passed: counted, and the source's challenge bucket gets its token back.
    private func authenticated(_ username: String, key: [UInt8], origin: ClientOrigin, now: Int64) -> Authenticated {
        counters.auth[AuthOutcome.ok.rawValue] += 1
        context.sourceLimits.challenges.refund(origin.fiveTuple.client.ip, now: now)
        return Authenticated(username: username, key: key)
    }
}
