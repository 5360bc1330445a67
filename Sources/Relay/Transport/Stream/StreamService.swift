import Glibc
import Logging
import RelayCore
import StunCodec

/// What the loop threads share for TURN over TCP and TLS: the listener addresses, the current TLS
/// context (replaced on SIGHUP; each loop reads it when it accepts a connection) and the
/// connection limits. Everything per connection lives on its loop thread (`StreamTransport`).
final class StreamService: Sendable {
    let configuration: RelayConfiguration
    let logger: Logger
    /// `listening-port` and `alt-listening-port` on every listen address, unless `no-tcp`.
    let tcpAddresses: [TransportAddress]
    /// `tls-listening-port` and `alt-tls-listening-port` on every listen address, unless `no-tls`.
    let configuredTLSAddresses: [TransportAddress]
    let limiter: ConnectionLimiter
    /// The context new TLS connections use; nil while TLS is not served.
    let tls = SharedState<TLSContext?>(nil)
    /// DTLS over UDP (docs/dtls.md) on the TLS ports, unless `no-dtls`: on its own listeners,
    /// and on the UDP listeners of TLS ports plain UDP uses too.
    let configuredDTLSAddresses: [TransportAddress]
    let configuredDTLSSharedAddresses: [TransportAddress]
    /// The context new DTLS sessions use; nil while DTLS is not served.
    let dtls = SharedState<TLSContext?>(nil)

    /// Set when the HTTP API's port is a TCP or TLS port of TURN's: the API is then served on
    /// those listeners, through this (docs/tls.md, "The API on the same port").
    let apiHandoff: APIHandoff?

    /// Keys a predecessor handed over in a live upgrade, or the state journal kept over a crash
    /// (`exportedKeys`), used by the first TLS and DTLS contexts.
    let inheritedKeys: [JournalKey]

    init(configuration c: RelayConfiguration, logger: Logger, inheritedKeys: [JournalKey] = []) {
        configuration = c
        self.logger = logger
        self.inheritedKeys = inheritedKeys
        let tcpPorts = [c.listeningPort] + (c.altListeningPort.map { [$0] } ?? [])
        let tlsPorts = [c.tlsListeningPort] + (c.altTLSListeningPort.map { [$0] } ?? [])
        tcpAddresses =
            c.noTCP ? [] : c.listeningIPs.flatMap { ip in tcpPorts.map { TransportAddress(ip: ip, port: $0) } }
        configuredTLSAddresses =
            c.noTLS ? [] : c.listeningIPs.flatMap { ip in tlsPorts.map { TransportAddress(ip: ip, port: $0) } }
        // On a TLS port that is also a UDP port, the UDP listener takes DTLS too, sorted by the
        // first byte: a DTLS listener beside it would split the port's datagrams with it
        // (docs/dtls.md, "On a port plain UDP shares").
        let udpPorts = c.noUDP ? [] : [c.listeningPort] + (c.effectiveAltListeningPort.map { [$0] } ?? [])
        let dtls = c.noDTLS ? [] : c.listeningIPs.flatMap { ip in tlsPorts.map { TransportAddress(ip: ip, port: $0) } }
        configuredDTLSAddresses = dtls.filter { !udpPorts.contains($0.port) }
        configuredDTLSSharedAddresses = dtls.filter { udpPorts.contains($0.port) }
        limiter = ConnectionLimiter(ConnectionLimiter.Limits(configuration: c))
        apiHandoff = c.apiServedByLoops ? APIHandoff() : nil
        apiOnlyAddresses =
            c.apiServedByLoops && !c.apiSharesTURNPort
            ? [TransportAddress(ip: c.apiListeningIP, port: c.apiListeningPort)] : []
    }

    /// The API's own address when the loops serve it there (`apiServedByLoops` on a port TURN
    /// does not use): a listener of each loop whose connections are all the API's.
    let apiOnlyAddresses: [TransportAddress]
    /// The API's TLS context for those listeners (`api-cert`, else `cert`); nil without TLS.
    let apiTLS = SharedState<TLSContext?>(nil)

    /// Whether connections on `listener` may be the HTTP API's.
    func servesAPI(_ listener: StreamListener) -> Bool {
        apiHandoff != nil && (listener.apiOnly || (configuration.apiSharesTURNPort && listener.address.port == configuration.apiListeningPort))
    }

    /// DTLS listener addresses: the configured ones once a certificate is loaded, else none.
    var dtlsAddresses: [TransportAddress] { dtls.value == nil ? [] : configuredDTLSAddresses }

    /// UDP listener addresses that take DTLS too, once a certificate is loaded.
    var dtlsSharedAddresses: [TransportAddress] { dtls.value == nil ? [] : configuredDTLSSharedAddresses }

    /// TLS listener addresses: the configured ones once a certificate is loaded, else none.
    var tlsAddresses: [TransportAddress] { tls.value == nil ? [] : configuredTLSAddresses }

    /// TLS listener addresses TCP does not share.
    var tlsOnlyAddresses: [TransportAddress] {
        let shared = Set(sharedAddresses)
        return tlsAddresses.filter { !shared.contains($0) }
    }

    /// Addresses TCP and TLS share (a TCP port that is also a TLS port, 443 say): one listener
    /// each, whose connections' first byte says which they speak (docs/tls.md, "One port for
    /// everything"). Without a certificate such a port is TCP's alone.
    var sharedAddresses: [TransportAddress] {
        let tls = Set(tlsAddresses)
        return tcpAddresses.filter { tls.contains($0) }
    }

    /// What a connection accepted on `listener` from `client` may start with; nil when its
    /// listener's transport is all it can be and no PROXY protocol header is to be looked for.
    func opening(on listener: StreamListener, from client: IPAddress) -> StreamOpening.Expected? {
        let proxy = configuration.proxyProtocolFrom
        let api = servesAPI(listener)
        guard listener.sharedWithTLS || api || !proxy.isEmpty else { return nil }
        if listener.apiOnly {
            return StreamOpening.Expected(
                tls: configuration.apiUsesTLS, plain: false, proxyHeader: proxy.contains { $0.contains(client) },
                api: true, plainHTTP: !configuration.apiUsesTLS, apiOnly: true)
        }
        return StreamOpening.Expected(
            tls: listener.transport == .tls || listener.sharedWithTLS, plain: listener.transport == .tcp,
            proxyHeader: proxy.contains { $0.contains(client) }, api: api,
            plainHTTP: api && !configuration.apiUsesTLS)
    }

    /// Loads the certificate before the loops start. Without `cert` the TLS listeners stay off with
    /// a warning (as coturn does); a certificate that does not load stops the start.
    func prepare() throws(RelayServer.StartError) {
        if let apiHandoff, apiHandoff.listenError != 0 {
            throw RelayServer.StartError(
                description: "cannot open the API's listener for the loops: \(String(cString: strerror(apiHandoff.listenError)))")
        }
        raiseDescriptorLimit()
        try prepareTLS()
        try prepareDTLS()
        try prepareAPITLS()
    }

    /// The API's context, when the loops serve the API on its own port over TLS.
    private func prepareAPITLS() throws(RelayServer.StartError) {
        guard !apiOnlyAddresses.isEmpty, configuration.apiUsesTLS else { return }
        do {
            let context = try TLSContext(configuration: configuration.apiTLSConfiguration, streams: true)
            apiTLS.withLock { $0 = context }
        } catch {
            throw RelayServer.StartError(description: "HTTPS for the API: \(error.description)")
        }
    }

    private func prepareTLS() throws(RelayServer.StartError) {
        guard !configuredTLSAddresses.isEmpty else { return }
        guard configuration.cert != nil else {
            logger.warning(
                "TLS listeners not started: no 'cert' configured (set cert and pkey, or no-tls)",
                metadata: ["event": "tls_disabled"])
            return
        }
        do {
            let context = try TLSContext(configuration: configuration, streams: true, ticketKeys: inherited(Self.tlsTicketKeysName))
            context.serve(tenants: try TLSContext.tenantContexts(configuration, ticketKeys: context.ticketKeys))
            tls.withLock { $0 = context }
            logger.info(
                "TLS certificate loaded",
                metadata: [
                    "event": "tls_loaded", "cert": "\(configuration.cert ?? "")", "sha256": "\(context.fingerprint)",
                    "min_version": "\(context.minimumVersion)",
                ])
        } catch {
            throw RelayServer.StartError(description: "cannot load TLS certificate: \(error.description)")
        }
    }

    /// SIGHUP: reads `cert` and `pkey` again. New connections get the new context; connections
    /// already open keep theirs. A certificate that does not load leaves the old one in place.
    func reloadTLS(using configuration: RelayConfiguration) {
        var logger = logger
        logger.logLevel = configuration.logLevel
        reloadDTLS(using: configuration, logger: logger)
        // The API's own context: a file that does not load keeps the running one (the API
        // service logs why).
        if apiTLS.value != nil, configuration.apiUsesTLS,
            let next = try? TLSContext(configuration: configuration.apiTLSConfiguration, streams: true)
        {
            apiTLS.withLock { $0 = next }
        }
        guard tls.value != nil else {
            logger.info("SIGHUP: TLS is not served, nothing to reload", metadata: ["event": "tls_reload_skipped"])
            return
        }
        do {
            let context = try TLSContext(configuration: configuration, streams: true)
            context.serve(tenants: try TLSContext.tenantContexts(configuration, ticketKeys: context.ticketKeys))
            tls.withLock { $0 = context }
            logger.info(
                "TLS certificate reloaded",
                metadata: [
                    "event": "tls_reloaded", "cert": "\(configuration.cert ?? "")", "sha256": "\(context.fingerprint)",
                ])
        } catch {
            logger.error(
                "TLS certificate reload failed, keeping the previous one: \(error.description)",
                metadata: ["event": "tls_reload_failed"])
        }
    }

    /// Lifts the soft descriptor limit towards the hard one so `max-connections` can be reached.
    private func raiseDescriptorLimit() {
        guard !tcpAddresses.isEmpty || !configuredTLSAddresses.isEmpty || !configuredDTLSAddresses.isEmpty else { return }
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_RESOURCE, &limit) == 0 else { return }
        let wanted = rlim_t(configuration.maxConnections) + rlim_t(configuration.maxPort - configuration.minPort) + 1024
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        _ = setrlimit(RLIMIT_NOFILE_RESOURCE, &limit)
        if limit.rlim_cur < wanted {
            logger.warning(
                "open-file limit \(limit.rlim_cur) is below what max-connections and the relay port range need (\(wanted))",
                metadata: ["event": "fd_limit"])
        }
    }
}

private let RLIMIT_NOFILE_RESOURCE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
