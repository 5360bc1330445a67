import StunCodec

/// The client side of the long-term credential mechanism (RFC 8489 §9.2) over any transport:
/// `exchange` sends one message and returns the answer (nil when none came).
///
/// `request` does the dance real clients do: an unsigned request first while no nonce is
/// known, then the same request signed with the REALM and NONCE of the 401, and once more
/// with the new NONCE of a 438.
final class TurnTestClient {
    var username: String
    var password: String
    var realm: String?
    var nonce: String?
    /// Adds FINGERPRINT to every request.
    var fingerprint = false
    /// The password algorithm chosen from the server's PASSWORD-ALGORITHMS (RFC 8489 §9.2.5);
    /// nil: an RFC 5389 client, MD5 without PASSWORD-ALGORITHM(S).
    var algorithm: PasswordAlgorithm?
    /// PASSWORD-ALGORITHMS as the last 401 or 438 listed them, echoed with `algorithm`.
    var offered: [PasswordAlgorithm]?
    var integrity = LongTermSignature.Integrity.sha1
    var userhash = false
    private let exchange: ([UInt8]) throws -> ReceivedStun?

    /// Why a request went unanswered.
    struct NoAnswer: Error, CustomStringConvertible {
        var method: Method
        var description: String { "no answer to method 0x\(String(method.rawValue, radix: 16))" }
    }

    init(username: String, password: String, exchange: @escaping ([UInt8]) throws -> ReceivedStun?) {
        self.username = username
        self.password = password
        self.exchange = exchange
    }

    /// MD5 or SHA-256 of username ":" realm ":" password (RFC 8489 §9.2.2, §18.5.1).
    var key: [UInt8] {
        guard algorithm == .sha256 else {
            return KeyDerivation.longTermKeyMD5(username: username, realm: realm ?? "", password: password)
        }
        return KeyDerivation.longTermKeySHA256(
            username: Array(username.utf8), realm: Array((realm ?? "").utf8), password: Array(password.utf8))
    }

    /// The signature for the next request, once a realm and nonce are known.
    var signature: LongTermSignature? {
        guard let realm, let nonce else { return nil }
        return LongTermSignature(
            username: username, realm: realm, nonce: nonce, key: key, listed: algorithm == nil ? nil : offered,
            chosen: algorithm, integrity: integrity, userhash: userhash)
    }

    /// Sends raw bytes and returns the answer.
    func send(_ bytes: [UInt8]) throws -> ReceivedStun? { try exchange(bytes) }

    /// A request signed with the current realm and nonce (unsigned while none is known).
    func signedRequest(_ method: Method, transactionID: TransactionID = .random(), _ body: StunBody = { _ in })
        throws -> [UInt8]
    {
        try StunTestMessages.request(
            method, transactionID: transactionID, signature: signature, fingerprint: fingerprint, body)
    }

    /// Takes REALM and NONCE from a 401 or 438 (RFC 8489 §9.2.4).
    func learn(from challenge: ReceivedStun) {
        if let realm = challenge.realm { self.realm = realm }
        if let nonce = challenge.nonce { self.nonce = nonce }
        if let listed = challenge.decode(PasswordAlgorithms.self) { offered = listed.algorithms }
    }

    /// Sends an unsigned Refresh to be challenged and learns REALM and NONCE from the 401.
    @discardableResult
    func challenge() throws -> ReceivedStun {
        guard let answer = try send(try StunTestMessages.request(.refresh, fingerprint: fingerprint)) else {
            throw NoAnswer(method: .refresh)
        }
        learn(from: answer)
        return answer
    }

    /// Sends `method` with the 401 dance and returns the final answer.
    func request(_ method: Method, _ body: StunBody = { _ in }) throws -> ReceivedStun {
        if nonce == nil {
            let first = try StunTestMessages.request(method, fingerprint: fingerprint, body)
            guard let challenge = try send(first) else { throw NoAnswer(method: method) }
            guard challenge.errorCode == 401, challenge.realm != nil, challenge.nonce != nil else { return challenge }
            learn(from: challenge)
        }
        guard var answer = try send(try signedRequest(method, body)) else { throw NoAnswer(method: method) }
        if answer.errorCode == 438, answer.nonce != nil {
            learn(from: answer)
            guard let retried = try send(try signedRequest(method, body)) else { throw NoAnswer(method: method) }
            answer = retried
        }
        return answer
    }

    // MARK: TURN requests

    /// Allocate for UDP (RFC 8656 §7.1) with whatever `extra` adds.
    func allocate(lifetime: UInt32? = nil, _ extra: @escaping StunBody = { _ in }) throws -> ReceivedStun {
        try request(.allocate) { w in
            try w.append(RequestedTransport.udp)
            if let lifetime { try w.append(Lifetime(seconds: lifetime)) }
            try extra(&w)
        }
    }

    /// Refresh (RFC 8656 §8.1); LIFETIME 0 deletes.
    func refresh(lifetime: UInt32? = nil) throws -> ReceivedStun {
        try request(.refresh) { w in
            if let lifetime { try w.append(Lifetime(seconds: lifetime)) }
        }
    }

    /// CreatePermission with one XOR-PEER-ADDRESS per peer (RFC 8656 §10.1).
    func createPermission(_ peers: [TransportAddress]) throws -> ReceivedStun {
        try request(.createPermission) { w in
            for peer in peers { try w.append(XORPeerAddress(address: peer)) }
        }
    }

    /// ChannelBind (RFC 8656 §12.1).
    func channelBind(_ channel: UInt16, to peer: TransportAddress) throws -> ReceivedStun {
        try request(.channelBind) { w in
            try w.append(ChannelNumber(value: channel))
            try w.append(XORPeerAddress(address: peer))
        }
    }
}
