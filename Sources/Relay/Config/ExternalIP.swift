import StunCodec

extension RelayConfiguration {
    /// coturn's `external-ip`: the public address a NAT maps to the server's private one.
    public struct ExternalIP: Hashable, Sendable {
        /// The address clients see and XOR-RELAYED-ADDRESS reports.
        public var publicIP: IPAddress
        /// The local address it stands for; nil when the server has one address of that family.
        public var privateIP: IPAddress?

        public init(publicIP: IPAddress, privateIP: IPAddress? = nil) {
            self.publicIP = publicIP
            self.privateIP = privateIP
        }
    }
}

extension RelayConfiguration.ExternalIP: CustomStringConvertible {
    /// `public` or `public/private`, as in the configuration file.
    public var description: String {
        privateIP.map { "\(publicIP)/\($0)" } ?? "\(publicIP)"
    }
}
