import COpenSSL
import RelayCore

/// Each tenant's certificate, chosen by the TLS server name (SNI, RFC 6066 §3; docs/tenants.md).
/// The node's context answers the ClientHello's server name by switching the connection to the
/// tenant's context (`SSL_set_SSL_CTX`); a name no tenant claims keeps the node's certificate.
///
/// The callback finds the tenants' contexts by its own `SSL_CTX` in a table of the process,
/// not through a pointer it was handed, so a context a reload replaced mid-handshake is simply
/// not found (the node's certificate is served) instead of being read after it was freed.
extension TLSContext {
    /// Tenants' contexts by server name (lower case), per node context (its `SSL_CTX` address).
    static let serverNameTable = Locked<[Int: [String: TLSContext]]>([:])

    /// Serves `tenants` (server name → that tenant's context) from this context.
    func serve(tenants: [String: TLSContext]) {
        guard !tenants.isEmpty else { return }
        Self.serverNameTable.withLock { $0[Int(bitPattern: context)] = tenants }
        let callback: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutableRawPointer?) -> Int32 = {
            ssl, _, _ in
            guard let ssl, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name), let own = SSL_get_SSL_CTX(ssl)
            else { return SSL_TLSEXT_ERR_OK }
            let wanted = String(cString: name).lowercased()
            let tenant = TLSContext.serverNameTable.withLock { $0[Int(bitPattern: own)]?[wanted] }
            if let tenant { SSL_set_SSL_CTX(ssl, tenant.context) }
            return SSL_TLSEXT_ERR_OK
        }
        SSL_CTX_callback_ctrl(
            context, SSL_CTRL_SET_TLSEXT_SERVERNAME_CB, unsafeBitCast(callback, to: (@convention(c) () -> Void).self))
    }

    /// Forgets this context's tenants (its `deinit`).
    func forgetTenants() {
        _ = Self.serverNameTable.withLock { $0.removeValue(forKey: Int(bitPattern: context)) }
    }

    /// The tenants' contexts for `configuration`: each tenant with `cert` gets a context of the
    /// node's TLS settings with its own certificate and key, under each of its server names.
    static func tenantContexts(_ configuration: RelayConfiguration, ticketKeys: [UInt8]) throws(LoadError)
        -> [String: TLSContext]
    {
        var contexts: [String: TLSContext] = [:]
        for tenant in configuration.tenants {
            guard let cert = tenant.configuration.cert else { continue }
            var c = configuration
            c.cert = cert
            c.pkey = tenant.configuration.pkey
            c.pkeyPassword = tenant.configuration.pkeyPassword
            let context: TLSContext
            do {
                context = try TLSContext(configuration: c, streams: true, ticketKeys: ticketKeys)
            } catch {
                throw LoadError(description: "tenant '\(tenant.name)': \(error.description)")
            }
            for name in tenant.configuration.serverNames { contexts[name] = context }
        }
        return contexts
    }
}
