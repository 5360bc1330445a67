import StunCodec

extension RelayCore {
    /// Who sent an authenticated request and the key to sign the response with.
    struct Authenticated {
        var username: String
        var key: IntegrityKey
        /// How the key was derived and which integrity attribute verified (for allocations).
        var credentials = CredentialAlgorithms()
        /// The tenant whose credentials verified (docs/tenants.md); 0 for the default one.
        var tenant = 0
    }

    /// The long-term credential mechanism (RFC 8489 §9.2.4), in its order: 400 for missing or
    /// malformed USERNAME (or USERHASH), REALM or NONCE, and for PASSWORD-ALGORITHM(S) that fail
    /// the bid-down checks; 401 when the user is unknown or expired or the integrity does not
    /// verify; 438 when the nonce is no longer valid. On failure the answer is already queued and
    /// nil is returned. With an existing allocation the request must use its USERNAME (else 441)
    /// and is checked with its stored key, so a rotated REST secret does not break refreshes of
    /// calls in progress (RFC 8656 §8).
    ///
    /// With tenants (docs/tenants.md), the request's tenant is the one its address, TLS server
    /// name or ORIGIN names, whose realm its 401 carried and whose credentials alone are tried;
    /// on an address tenants share it is the tenant whose REST secret verifies the credential,
    /// the default tenant's users and secrets tried first.
    ///
    /// Per source address (docs/rate-limits.md): a 401 to a request without credentials is
    /// charged to `unauth-rate-limit`; the answers to failed credentials (400, 401, 441) to
    /// `auth-failure-rate-limit`. A request whose credentials verify is never limited: its 438
    /// is not charged, and its success gives the source back one challenge.
    func authenticate(_ message: StunMessage, origin: ClientOrigin, existing: Allocation?, now: Int64) -> Authenticated? {
        if settings.noAuth {
            let tenant = existing?.tenant ?? tenantHint(for: message, origin: origin) ?? 0
            return Authenticated(username: "", key: IntegrityKey(bytes: [], sha256: false), tenant: tenant)
        }
        // The realm a 401 or 438 names is the one the request's address, server name or ORIGIN
        // names, as it was for the Allocate: an allocation its REST secret placed in a tenant on
        // a shared address keeps the default realm its key was derived with.
        let requestHint = tenantHint(for: message, origin: origin)
        let hint = existing?.tenant ?? requestHint
        let realmToName = requestHint.map { credentials(ofTenant: $0).realm } ?? context.credentials.realm
        guard message.integrityOffset != nil || message.integritySHA256Offset != nil else {
            counters.auth[AuthOutcome.challenged.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .challenge, realm: realmToName, now: now)
            return nil
        }
        // Exactly one of USERNAME and USERHASH, a REALM and a NONCE; a USERNAME that is not
        // OpaqueString UTF-8 of fewer than 509 bytes (RFC 8489 §14.3), or a REALM over 763 bytes
        // (§14.9), is malformed: 400, before any key is derived or logged. So are password
        // algorithms that fail the checks of §9.2.4.
        let usernameAttribute = message.attribute(.username)
        let userhashAttribute = message.attribute(.userhash)
        guard (usernameAttribute == nil) != (userhashAttribute == nil), let realm = message.attribute(.realm),
            let nonce = message.attribute(.nonce), realm.value.count <= Realm.maxDecodedBytes,
            let algorithm = passwordAlgorithm(of: message, nonce: nonce.value)
        else {
            return refuseMalformed(message, origin: origin, now: now)
        }
        let username: String
        if let usernameAttribute {
            guard case .success(let name) = UsernameCheck.validate(usernameAttribute.value) else {
                return refuseMalformed(message, origin: origin, now: now)
            }
            username = name
        } else if let userhashAttribute,
            let name = credentials(ofTenant: hint ?? 0).username(forUserhash: Array(userhashAttribute.value))
        {
            username = name
        } else {
            counters.auth[AuthOutcome.unknownUser.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, realm: realmToName, now: now)
            return nil
        }
        if let existing, !existing.isUsername(username) {
            counters.auth[AuthOutcome.wrongCredentials.rawValue] += 1
            if withinFailureBudget(origin, now: now) {
                sendError(.wrongCredentials, to: message, origin: origin, key: nil)
            }
            return nil
        }
        let key: [UInt8]
        let tenant: Int
        switch verifiedKey(of: message, username: username, algorithm: algorithm, existing: existing, hint: hint, now: now) {
        case .failed(.unknownUser)
        where existing == nil
            && holdForLookup(
                message, origin: origin, username: username, realm: credentials(ofTenant: hint ?? 0).realm,
                algorithm: algorithm, now: now):
            return nil
        case .failed(let outcome):
            counters.auth[outcome.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, realm: realmToName, now: now)
            return nil
        case .verified(let verified, let verifiedTenant):
            key = verified
            tenant = verifiedTenant
        }
        // A default-tenant user id that reads as another tenant's quota user (`<tenant>/…`)
        // would share that user's quota and blocks: refused (docs/tenants.md).
        if existing == nil, tenant == 0, context.tenants.isMultiTenant,
            context.tenants.index(ofQuotaUser: String(context.credentials.userID(of: username))) != 0
        {
            counters.auth[AuthOutcome.unknownUser.rawValue] += 1
            sendChallenge(.unauthorized, to: message, origin: origin, charging: .failure, realm: realmToName, now: now)
            return nil
        }
        guard context.nonces.check(nonce.value, client: origin.fiveTuple.client.ip, now: wallTime(now)) == .fresh else {
            counters.auth[AuthOutcome.staleNonce.rawValue] += 1
            sendChallenge(.staleNonce, to: message, origin: origin, charging: nil, realm: realmToName, now: now)
            return nil
        }
        counters.auth[AuthOutcome.ok.rawValue] += 1
        context.sourceLimits.challenges.refund(origin.fiveTuple.client.ip, now: now)
        // Answers carry MESSAGE-INTEGRITY-SHA256 unless the request was processed as MD5 for want
        // of PASSWORD-ALGORITHM(S) (§9.2.4) and used MESSAGE-INTEGRITY alone.
        let sha256 = message.contains(.passwordAlgorithm) || message.integritySHA256Offset != nil
        return Authenticated(
            username: username, key: IntegrityKey(bytes: key, sha256: sha256),
            credentials: CredentialAlgorithms(
                passwordAlgorithm: algorithm, integritySHA256: message.integritySHA256Offset != nil),
            tenant: tenant)
    }

    /// 400 (counted as malformed), within the source's failure budget; always nil.
    private func refuseMalformed(_ message: StunMessage, origin: ClientOrigin, now: Int64) -> Authenticated? {
        counters.auth[AuthOutcome.malformed.rawValue] += 1
        if withinFailureBudget(origin, now: now) { sendError(.badRequest, to: message, origin: origin, key: nil) }
        return nil
    }

    /// The password algorithm a request's key is derived with (RFC 8489 §9.2.4), nil when the
    /// request must be refused with 400. When the nonce's cookie announces password algorithms:
    /// MD5 if the request has neither PASSWORD-ALGORITHMS nor PASSWORD-ALGORITHM; otherwise both
    /// must be there, the list exactly the one this server sends, and the choice on it. Without
    /// the cookie (a nonce of RFC 5389's kind) the request is MD5's. MD5 is refused when the
    /// server does not offer it.
    private func passwordAlgorithm(of message: StunMessage, nonce: UnsafeRawBufferPointer) -> PasswordAlgorithm? {
        var algorithm = PasswordAlgorithm.md5
        if let features = SecurityFeatures.announced(in: nonce), features.contains(.passwordAlgorithms),
            message.contains(.passwordAlgorithms) || message.contains(.passwordAlgorithm)
        {
            guard let listed = try? message.decode(PasswordAlgorithms.self),
                let chosen = try? message.decode(PasswordAlgorithm.self), listed.algorithms == settings.passwordAlgorithms,
                listed.algorithms.contains(chosen)
            else { return nil }
            algorithm = chosen
        }
        return settings.passwordAlgorithms.contains(algorithm) ? algorithm : nil
    }

    private enum KeyCheck {
        case verified([UInt8], tenant: Int)
        case failed(AuthOutcome)
    }

    /// The key `message`'s MESSAGE-INTEGRITY(-SHA256) verifies with, and its tenant: the existing
    /// allocation's; else one of the user's (a static user's, or one per REST secret) for
    /// `algorithm` in the tenant `hint` names; else, on an address tenants share, the default
    /// tenant's, then each tenant's REST secrets under the default realm, in order
    /// (docs/tenants.md). A secret belongs to one tenant only, so at most one tenant verifies.
    private func verifiedKey(
        of message: StunMessage, username: String, algorithm: PasswordAlgorithm, existing: Allocation?, hint: Int?,
        now: Int64
    ) -> KeyCheck {
        if let existing {
            let key = existing.key
            return message.verifyIntegrity(key: key) == .valid
                ? .verified(key, tenant: existing.tenant) : .failed(.badIntegrity)
        }
        let first = verifiedKey(
            of: message, in: credentials(ofTenant: hint ?? 0), tenant: hint ?? 0, username: username,
            algorithm: algorithm, lateUsers: true, now: now)
        guard case .failed(var outcome) = first, hint == nil, context.tenants.isMultiTenant else { return first }
        for index in context.tenants.order {
            guard let tenant = context.tenants.configured(index), !tenant.sharedCredentials.restSecrets.isEmpty else {
                continue
            }
            let check = verifiedKey(
                of: message, in: tenant.sharedCredentials, tenant: index, username: username, algorithm: algorithm,
                lateUsers: false, now: now)
            switch check {
            case .verified: return check
            case .failed(let failure):
                // The most telling failure: a bad integrity over an unknown user, expiry over both.
                if failure == .expired || (failure == .badIntegrity && outcome == .unknownUser) { outcome = failure }
            }
        }
        return .failed(outcome)
    }

    private func verifiedKey(
        of message: StunMessage, in store: CredentialStore, tenant: Int, username: String,
        algorithm: PasswordAlgorithm, lateUsers: Bool, now: Int64
    ) -> KeyCheck {
        switch store.candidateKeys(for: username, algorithm: algorithm, now: wallTime(now)) {
        case .failure(.unknownUser) where algorithm == .md5 && lateUsers:
            // A user the database's view did not have yet, found by a lookup (docs/userdb.md).
            guard let key = lateUserKey(username, realm: store.realm, now: now) else { return .failed(.unknownUser) }
            return message.verifyIntegrity(key: key) == .valid ? .verified(key, tenant: tenant) : .failed(.badIntegrity)
        case .failure(let failure):
            return .failed(failure == .expired ? .expired : .unknownUser)
        case .success(let keys):
            for key in keys where message.verifyIntegrity(key: key) == .valid { return .verified(key, tenant: tenant) }
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
