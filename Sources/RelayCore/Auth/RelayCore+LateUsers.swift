import StunCodec

/// Users the user database's view did not have yet (docs/userdb.md): the pending-admission flow
/// applied to credentials. The Allocate is held, the I/O layer asks the database off the loop,
/// and the request is handled again, as it came, when the answer arrives.
extension RelayCore {
    /// Holds `message` for a lookup of `username` in `realm` when that may help: an MD5 Allocate
    /// (a database holds MD5 keys) of a long-term user (not a REST name), with a user database,
    /// not answered yet, within the source's failure budget (a lookup costs the database a
    /// query). A retransmission of a request already held waits with it. True when held or
    /// dropped.
    func holdForLookup(
        _ message: StunMessage, origin: ClientOrigin, username: String, realm: String, algorithm: PasswordAlgorithm,
        now: Int64
    ) -> Bool {
        guard settings.lookUpUnknownUsers, message.type.method == .allocate, algorithm == .md5,
            CredentialStore.restExpiry(of: username, separator: context.credentials.separator) == nil
        else { return false }
        let key = LateUsers.Key(name: username, realm: realm)
        guard lateUsers.answer(key, now: now) == nil else { return false }
        if lateUsers.holds(origin.fiveTuple, transactionID: message.transactionID) { return true }
        guard withinFailureBudget(origin, now: now) else { return true }
        let request = LateUsers.Held(
            key: key, bytes: Array(message.bytes), origin: origin, transactionID: message.transactionID, since: now)
        guard let held = lateUsers.hold(request) else { return false }
        counters.userLookupsHeld &+= 1
        if held.ask { outbox.emit(.lookUpUser(UserLookup(name: username, realm: realm, loop: context.loop))) }
        return true
    }

    /// The MD5 key a lookup found for `username` in `realm`, if one did.
    func lateUserKey(_ username: String, realm: String, now: Int64) -> [UInt8]? {
        guard settings.lookUpUnknownUsers, case .found(let key) = lateUsers.answer(.init(name: username, realm: realm), now: now)
        else { return nil }
        return key
    }

    /// The database's answer for `lookup`: its MD5 key, nil when it has no such user (or, with
    /// `failed`, could not be asked). The Allocates that waited are handled again, in the order
    /// they came.
    public func userLookedUp(_ lookup: UserLookup, md5: [UInt8]?, failed: Bool = false, now: Int64) {
        assertOwned()
        let key = LateUsers.Key(name: lookup.name, realm: lookup.realm)
        let found = md5?.count == 16 ? md5 : nil
        for request in lateUsers.answered(key, md5: found, failed: failed, now: now) {
            request.bytes.withUnsafeBytes { handleClientPacket($0, from: request.origin, now: now) }
        }
    }

    /// Forgets lookups that never came back (the loop's sweep).
    func sweepLateUsers(now: Int64) { lateUsers.sweep(now: now) }
}
