import StunCodec

extension RelayCore {
    /// Binding request (RFC 8489 §6.3.1): XOR-MAPPED-ADDRESS with the source transport address.
    /// No authentication: STUN servers for ICE answer anyone.
    func handleBinding(_ message: StunMessage, from origin: ClientOrigin) {
        counters.bindingRequests += 1
        respond(to: message, origin: origin, messageClass: .successResponse, key: nil) { w throws(StunEncodeError) in
            try w.append(XORMappedAddress(address: origin.fiveTuple.client))
            try appendSoftware(&w)
        }
    }
}
