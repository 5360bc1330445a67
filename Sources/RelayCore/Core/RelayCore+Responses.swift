import StunCodec

extension RelayCore {
    /// Writes a response to `request` into the outbox: `body` adds the attributes, then
    /// MESSAGE-INTEGRITY or MESSAGE-INTEGRITY-SHA256 when `key` is given (`IntegrityKey` says
    /// which) and FINGERPRINT when the request carried one or `fingerprint` is configured
    /// (RFC 8489 §6.3, §9.2.4, §14.7). Returns the bytes written.
    @discardableResult
    func respond(
        to request: StunMessage, origin: ClientOrigin, messageClass: MessageClass, key: IntegrityKey?,
        _ body: (inout StunMessageWriter) throws(StunEncodeError) -> Void
    ) -> UnsafeRawBufferPointer? {
        respond(to: ReplyTarget(request), origin: origin, messageClass: messageClass, key: key, body)
    }

    /// `respond` for a request answered later than it was handled (a Connect, RFC 6062 §5.2).
    @discardableResult
    func respond(
        to request: ReplyTarget, origin: ClientOrigin, messageClass: MessageClass, key: IntegrityKey?,
        _ body: (inout StunMessageWriter) throws(StunEncodeError) -> Void
    ) -> UnsafeRawBufferPointer? {
        guard outbox.hasRoomForResponse else {
            counters.drop(.outboxFull)
            return nil
        }
        let buffer = outbox.scratch()
        do {
            let length = try encodeResponse(into: buffer, to: request, messageClass: messageClass, key: key, body)
            outbox.commitScratch(length: length, route: .client(origin))
            return UnsafeRawBufferPointer(rebasing: buffer[0..<length])
        } catch {
            counters.drop(.outboxFull)
            return nil
        }
    }

    /// Writes a response to `request` into `buffer` and returns its length: what `body` adds,
    /// then MESSAGE-INTEGRITY or MESSAGE-INTEGRITY-SHA256 under `key` (RFC 8489 §14.5, §14.6),
    /// then FINGERPRINT when the request had one or `fingerprint` is set (§14.7).
    func encodeResponse(
        into buffer: UnsafeMutableRawBufferPointer, to request: ReplyTarget, messageClass: MessageClass,
        key: IntegrityKey?, _ body: (inout StunMessageWriter) throws(StunEncodeError) -> Void
    ) throws(StunEncodeError) -> Int {
        var w = try StunMessageWriter(
            into: buffer, type: MessageType(method: request.method, messageClass: messageClass),
            transactionID: request.transactionID)
        try body(&w)
        if let key, key.sha256 {
            try w.appendMessageIntegritySHA256(key: key.bytes)
        } else if let key {
            try w.appendMessageIntegrity(key: key.bytes)
        }
        if request.fingerprinted || settings.fingerprint { try w.appendFingerprint() }
        return w.count
    }

    /// An error response (RFC 8489 §6.3.4) with ERROR-CODE and whatever `extra` adds.
    func sendError(
        _ error: RelayError, to request: StunMessage, origin: ClientOrigin, key: IntegrityKey?,
        _ extra: (inout StunMessageWriter) throws(StunEncodeError) -> Void = { _ in }
    ) {
        sendError(error, to: ReplyTarget(request), origin: origin, key: key, extra)
    }

    func sendError(
        _ error: RelayError, to request: ReplyTarget, origin: ClientOrigin, key: IntegrityKey?,
        _ extra: (inout StunMessageWriter) throws(StunEncodeError) -> Void = { _ in }
    ) {
        counters.errorResponses[RelayError.allCases.firstIndex(of: error)!] += 1
        respond(to: request, origin: origin, messageClass: .errorResponse, key: key) { w throws(StunEncodeError) in
            try w.append(ErrorCode(code: error.code, reason: error.reason))
            try extra(&w)
            if error.code != 401 && error.code != 438, let software = settings.softwareAttribute {
                try w.append(Software(value: software))
            }
        }
    }

    /// Which per-source bucket an unauthenticated answer is charged to (docs/rate-limits.md).
    enum ChallengeCharge {
        /// A request without credentials: `unauth-rate-limit`.
        case challenge
        /// Credentials that failed: `auth-failure-rate-limit`.
        case failure
    }

    /// 401 or 438 with REALM, a fresh NONCE and, when the server offers password algorithms,
    /// PASSWORD-ALGORITHMS (RFC 8489 §9.2.4). No SOFTWARE: these answers go
    /// to unauthenticated sources and must stay small. Over the source IP's bucket for `charge`
    /// the request is dropped (counted), so relayd is no use as a reflector; nil charges nothing
    /// (a 438 to credentials that verified).
    func sendChallenge(
        _ error: RelayError, to request: StunMessage, origin: ClientOrigin, charging charge: ChallengeCharge?,
        realm: String? = nil, now: Int64
    ) {
        switch charge {
        case .challenge:
            guard context.sourceLimits.challenges.allow(origin.fiveTuple.client.ip, now: now) else {
                return counters.drop(.rateLimited)
            }
        case .failure:
            guard withinFailureBudget(origin, now: now) else { return }
        case nil:
            break
        }
        let nonce = context.nonces.make(
            for: origin.fiveTuple.client.ip, now: wallTime(now),
            features: settings.offersPasswordAlgorithms ? .passwordAlgorithms : [])
        sendError(error, to: request, origin: origin, key: nil) { w throws(StunEncodeError) in
            try w.append(Realm(value: realm ?? context.credentials.realm))
            try w.append(Nonce(value: nonce))
            if settings.offersPasswordAlgorithms {
                try w.append(PasswordAlgorithms(algorithms: settings.passwordAlgorithms))
            }
        }
    }

    /// SOFTWARE for success responses, when configured (RFC 8489 §14.14).
    func appendSoftware(_ w: inout StunMessageWriter) throws(StunEncodeError) {
        if let software = settings.softwareAttribute { try w.append(Software(value: software)) }
    }
}

/// What a response needs of its request: the method, the transaction ID and whether the
/// request carried FINGERPRINT (RFC 8489 §6.3, §14.7).
struct ReplyTarget {
    var method: Method
    var transactionID: TransactionID
    var fingerprinted: Bool

    init(_ request: StunMessage) {
        method = request.type.method
        transactionID = request.transactionID
        fingerprinted = request.fingerprintOffset != nil
    }

    init(method: Method, transactionID: TransactionID, fingerprinted: Bool) {
        self.method = method
        self.transactionID = transactionID
        self.fingerprinted = fingerprinted
    }
}
