import StunCodec

extension RelayCore {
    /// Who sent an authenticated request and the key to sign the response with.
    struct Authenticated {
        var username: String
        var key: [UInt8]
    }

    /// The long-term credential mechanism (RFC 8489 §9.2.4), in its order: 400 for missing or
    /// malformed USERNAME, REALM or NONCE; 401 when the user is unknown or expired or the
    /// integrity does not verify; 438 when the nonce is no longer valid. On failure the answer is
    /// already queued and nil is returned. With an existing allocation the request must use its
    /// USERNAME (else 441) and is checked with its stored key, so a rotated REST secret does not
    /// break refreshes of calls in progress (RFC 8656 §8).
    ///
    /// Per source address (docs/rate-limits.md): a 401 to a request without credentials is
    /// charged to `unauth-rate-limit`; the answers to failed credentials (400, 401, 441) to
    /// `auth-failure-rate-limit`. A request whose credentials verify is never limited: its 438
    /// is not charged, and its success gives the source back one challenge.
    func authenticate(_ message: StunMessage, origin: ClientOrigin, existing: Allocation?, now: Int64) -> Authenticated? {
        if settings.noAuth { return Authenticated(username: "", key: []) }
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
            if withinFailureBudget(origin, now: now) { sendError(.badRequest, to: message, origin: origin, key: nil) }
            return nil
        }
        if let existing, username != existing.username {
            counters.auth[AuthOutcome.wrongCredentials.rawValue] += 1
            if withinFailureBudget(origin, now: now) {
                sendError(.wrongCredentials, to: message, origin: origin, key: nil)
            }
            return nil
        }
        let key: [UInt8]
        switch verifiedKey(of: message, username: username, existing: existing, now: now) {
        case .failed(let outcome):
            counters.auth[outcome.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, now: now)
            return nil
        case .verified(let verified):
            key = verified
        }
        guard context.nonces.check(nonce.value, client: origin.fiveTuple.client.ip, now: wallTime(now)) == .fresh else {
            counters.auth[AuthOutcome.staleNonce.rawValue] += 1
            sendChallenge(.staleNonce, to: message, origin: origin, charging: nil, now: now)
            return nil
        }
        counters.auth[AuthOutcome.ok.rawValue] += 1
        context.sourceLimits.challenges.refund(origin.fiveTuple.client.ip, now: now)
        return Authenticated(username: username, key: key)
    }

    private enum KeyCheck {
        case verified([UInt8])
        case failed(AuthOutcome)
    }

    /// The key `message`'s MESSAGE-INTEGRITY verifies with: the existing allocation's, else one of
    /// the user's (a static user's, or one per REST secret).
    private func verifiedKey(of message: StunMessage, username: String, existing: Allocation?, now: Int64) -> KeyCheck {
        if let existing {
            return message.verifyIntegrity(key: existing.key) == .valid ? .verified(existing.key) : .failed(.badIntegrity)
        }
        switch context.credentials.candidateKeys(for: username, now: wallTime(now)) {
        case .failure(let failure):
            return .failed(failure == .expired ? .expired : .unknownUser)
        case .success(let keys):
            for key in keys where message.verifyIntegrity(key: key) == .valid { return .verified(key) }
            return .failed(.badIntegrity)
        }
    }

    /// Takes one answer from the source's `auth-failure-rate-limit`; false (counted) when spent.
    func withinFailureBudget(_ origin: ClientOrigin, now: Int64) -> Bool {
        guard context.sourceLimits.failures.allow(origin.fiveTuple.client.ip, now: now) else {
            counters.drop(.authFailureLimited)
            return false
        }
        return true
    }
}
