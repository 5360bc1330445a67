import StunCodec

/// The TURN requests the bench sends during setup, built (signed once a nonce is known) into
/// a byte array: control path, not per packet.
enum TurnRequest {
    case allocate(lifetime: UInt32)
    case refresh(lifetime: UInt32)
    case createPermission
    case channelBind

    var method: Method {
        switch self {
        case .allocate: .allocate
        case .refresh: .refresh
        case .createPermission: .createPermission
        case .channelBind: .channelBind
        }
    }

    /// The request for `client` with transaction `id`: unsigned while no NONCE is known,
    /// else with USERNAME, REALM, NONCE and MESSAGE-INTEGRITY (RFC 8489 §9.2.4), plus FINGERPRINT.
    func encode(for client: TurnClient, id: TransactionID) throws -> [UInt8] {
        var storage = [UInt8](repeating: 0, count: 1024)
        let count = try storage.withUnsafeMutableBytes { raw throws -> Int in
            var w = try StunMessageWriter(
                into: raw, type: MessageType(method: method, messageClass: .request), transactionID: id)
            switch self {
            case .allocate(let lifetime):
                try w.append(RequestedTransport.udp)
                try w.append(Lifetime(seconds: lifetime))
            case .refresh(let lifetime):
                try w.append(Lifetime(seconds: lifetime))
            case .createPermission:
                if let peer = client.peer { try w.append(XORPeerAddress(address: peer)) }
            case .channelBind:
                try w.append(ChannelNumber(value: client.channel))
                if let peer = client.peer { try w.append(XORPeerAddress(address: peer)) }
            }
            if let realm = client.realm, let nonce = client.nonce {
                try w.append(Username(value: client.credentials.username))
                try w.append(Realm(value: realm))
                try w.append(Nonce(value: nonce))
                try w.appendMessageIntegrity(key: client.key)
            }
            try w.appendFingerprint()
            return w.count
        }
        storage.removeLast(storage.count - count)
        return storage
    }
}
