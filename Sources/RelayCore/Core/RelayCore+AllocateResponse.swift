import StunCodec

extension RelayCore {
    /// The attributes of an Allocate success response (RFC 8656 §7.2 step 12, RFC 6156 §4,
    /// RFC 8016 §3.1): the relayed addresses, an ADDRESS-ERROR-CODE for a family that could not
    /// be allocated (in the code point the client asked with; `draft` for coturn's clients), the
    /// LIFETIME, a RESERVATION-TOKEN, a MOBILITY-TICKET, XOR-MAPPED-ADDRESS and SOFTWARE.
    func appendAllocateSuccess(
        _ w: inout StunMessageWriter, of allocation: Allocation, lifetime: Int64,
        addressError: (code: AddressErrorCode, draft: Bool)? = nil, reservation: UInt64? = nil,
        ticket: MobilityTicket? = nil
    ) throws(StunEncodeError) {
        try w.append(XORRelayedAddress(address: allocation.advertisedAddress))
        if let additional = allocation.additional {
            try w.append(XORRelayedAddress(address: additional.advertisedAddress))
        }
        if let (code, draft) = addressError {
            if draft {
                try w.appendAttribute(.addressErrorCodeDraft, length: code.encodedLength) {
                    code.encode(into: $0, transactionID: allocation.allocateTransactionID)
                }
            } else {
                try w.append(code)
            }
        }
        try w.append(Lifetime(seconds: UInt32(clamping: lifetime)))
        if let reservation { try w.append(ReservationToken(value: reservation)) }
        if let ticket { try w.append(ticket) }
        try w.append(XORMappedAddress(address: allocation.origin.fiveTuple.client))
        try appendSoftware(&w)
    }

    /// Answers a retransmitted Allocate (the allocation's own transaction ID, from its 5-tuple)
    /// with the success response the first copy got (RFC 8656 §7.2; RFC 8489 §6.3.1), while it is
    /// kept: the bytes kept, or the same response written again from the allocation. False when
    /// it is no longer kept (the caller answers 437).
    func resendAllocateResponse(of allocation: Allocation, to message: StunMessage, origin: ClientOrigin) -> Bool {
        if !allocation.allocateResponse.isEmpty {
            allocation.allocateResponse.withUnsafeBytes { outbox.enqueueCopy($0, route: .client(origin)) }
            return true
        }
        guard allocation.rebuildsAllocateResponse else { return false }
        respond(
            to: ReplyTarget(message), origin: origin, messageClass: .successResponse,
            key: integrityKey(of: allocation)
        ) { w throws(StunEncodeError) in
            try appendAllocateSuccess(&w, of: allocation, lifetime: allocation.expiry - allocation.created)
        }
        return true
    }

    /// The Allocate's success response while it is kept, as bytes, for the state journal and a
    /// live upgrade (the process after answers retransmissions with it); empty once not kept.
    func keptAllocateResponse(of allocation: Allocation) -> [UInt8] {
        guard allocation.allocateResponse.isEmpty, allocation.rebuildsAllocateResponse else {
            return allocation.allocateResponse
        }
        let reply = ReplyTarget(
            method: .allocate, transactionID: allocation.allocateTransactionID,
            fingerprinted: allocation.allocateFingerprinted)
        var bytes = [UInt8](repeating: 0, count: JournalFormat.maxAllocateResponseBytes)
        let length = bytes.withUnsafeMutableBytes { buffer -> Int in
            (try? encodeResponse(
                into: buffer, to: reply, messageClass: .successResponse, key: integrityKey(of: allocation)
            ) { w throws(StunEncodeError) in
                try appendAllocateSuccess(&w, of: allocation, lifetime: allocation.expiry - allocation.created)
            }) ?? 0
        }
        return Array(bytes.prefix(length))
    }

    /// The key `allocation`'s client authenticated with, and the integrity attribute its Allocate
    /// was answered with (RFC 8489 §9.2, §14.5, §14.6).
    private func integrityKey(of allocation: Allocation) -> IntegrityKey {
        IntegrityKey(bytes: allocation.key, sha256: allocation.allocateIntegritySHA256)
    }
}
