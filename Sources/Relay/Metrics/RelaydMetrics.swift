import RelayCore
import StunCodec

/// relayd's metric families, names prefixed `relayd_`, counters ending in `_total`, labels from
/// small fixed sets (transport, family, direction, reason, code), never user names.
/// docs/metrics.md maps them to coturn's names.
public enum RelaydMetrics {
    /// The `/metrics` page for the loop threads' summed metrics and the HTTP service's own.
    /// `carried` is added to every counter (a live upgrade's predecessor's values).
    public static func render(_ m: LoopMetrics, service: ServiceMetrics, carried: CarriedCounters = CarriedCounters())
        -> String
    {
        var p = PrometheusText()
        p.carried = carried
        let c = m.counters

        p.family(
            "relayd_allocations_active", .gauge,
            help: "Live TURN allocations by client transport and relayed address family.")
        for transport in TransportProtocol.allCases {
            for family in [IPAddress.Family.ipv4, .ipv6] {
                p.sample(
                    "relayd_allocations_active",
                    [("transport", transport.label), ("family", family == .ipv4 ? "ipv4" : "ipv6")],
                    m.allocations(transport, family))
            }
        }
        p.family("relayd_allocations_created_total", .counter, help: "TURN allocations created.")
        p.sample("relayd_allocations_created_total", [], c.allocationsCreated)
        p.family(
            "relayd_allocations_by_algorithm_total", .counter,
            help: "Of relayd_allocations_created_total, by password algorithm and integrity attribute (RFC 8489 section 9.2).")
        for algorithms in CredentialAlgorithms.all {
            p.sample(
                "relayd_allocations_by_algorithm_total",
                [("password_algorithm", algorithms.passwordLabel), ("integrity", algorithms.integrityLabel)],
                c.allocationsByCredentials[algorithms.index])
        }
        p.family(
            "relayd_allocations_expired_total", .counter,
            help: "TURN allocations that ended because their lifetime ran out.")
        p.sample("relayd_allocations_expired_total", [], c.allocationsExpired)
        p.family(
            "relayd_allocations_deleted_total", .counter,
            help: "TURN allocations ended otherwise: Refresh with lifetime 0, connection closed, shutdown.")
        p.sample("relayd_allocations_deleted_total", [], c.allocationsDeleted)
        p.family(
            "relayd_allocations_terminated_total", .counter,
            help: "TURN allocations an operator ended through the admin API (also counted as deleted).")
        p.sample("relayd_allocations_terminated_total", [], c.allocationsTerminated)
        p.family(
            "relayd_blocked_user_allocates_total", .counter,
            help: "Allocate requests refused with 403 because an operator blocked their user.")
        p.sample("relayd_blocked_user_allocates_total", [], c.allocatesOfBlockedUsers)
        p.family(
            "relayd_userdb_lookups_total", .counter,
            help: "Allocate requests held while the user database was asked for a user its in-memory view lacked.")
        p.sample("relayd_userdb_lookups_total", [], c.userLookupsHeld)
        p.family("relayd_permissions_active", .gauge, help: "Live permissions over all allocations.")
        p.sample("relayd_permissions_active", [], m.permissionsActive)
        p.family("relayd_channels_active", .gauge, help: "Live channel bindings over all allocations.")
        p.sample("relayd_channels_active", [], m.channelsActive)

        p.family("relayd_relayed_packets_total", .counter, help: "Application packets relayed, by direction.")
        p.sample("relayd_relayed_packets_total", [("direction", "client_to_peer")], c.packetsToPeer)
        p.sample("relayd_relayed_packets_total", [("direction", "peer_to_client")], c.packetsToClient)
        p.family(
            "relayd_short_circuited_packets_total", .counter,
            help: "Packets relayed between two allocations of one loop thread without crossing the kernel.")
        p.sample("relayd_short_circuited_packets_total", [], c.shortCircuited)
        p.family("relayd_relayed_bytes_total", .counter, help: "Application payload bytes relayed, by direction.")
        p.sample("relayd_relayed_bytes_total", [("direction", "client_to_peer")], c.bytesToPeer)
        p.sample("relayd_relayed_bytes_total", [("direction", "peer_to_client")], c.bytesToClient)

        p.family("relayd_offload_enabled", .gauge, help: "1 when the kernel fast path is attached (kernel-offload).")
        p.sample("relayd_offload_enabled", [], m.offloadEnabled)
        p.family(
            "relayd_offloaded_packets_total", .counter,
            help: "Of relayd_relayed_packets_total, the packets the kernel fast path relayed, by direction.")
        p.sample("relayd_offloaded_packets_total", [("direction", "client_to_peer")], m.kernelRelayed.packetsToPeer)
        p.sample("relayd_offloaded_packets_total", [("direction", "peer_to_client")], m.kernelRelayed.packetsToClient)
        p.family(
            "relayd_offloaded_bytes_total", .counter,
            help: "Of relayd_relayed_bytes_total, the bytes the kernel fast path relayed, by direction.")
        p.sample("relayd_offloaded_bytes_total", [("direction", "client_to_peer")], m.kernelRelayed.bytesToPeer)
        p.sample("relayd_offloaded_bytes_total", [("direction", "peer_to_client")], m.kernelRelayed.bytesToClient)
        p.family(
            "relayd_offloaded_xdp_packets_total", .counter,
            help: "Of relayd_offloaded_packets_total, the packets the XDP program relayed (kernel-offload-xdp).")
        p.sample("relayd_offloaded_xdp_packets_total", [], m.offloadXDP)
        p.family(
            "relayd_send_failures_total", .counter,
            help: "UDP datagrams the kernel refused to send: unreachable peers, over the path MTU with DONT-FRAGMENT, full buffers.")
        p.sample("relayd_send_failures_total", [], m.sendFailures)
        p.family(
            "relayd_state_restored_allocations_total", .counter,
            help: "UDP allocations read back from the state journal at start-up, by whether they were restored.")
        p.sample("relayd_state_restored_allocations_total", [("outcome", "restored")], m.stateRestored)
        p.sample("relayd_state_restored_allocations_total", [("outcome", "not_restored")], m.stateNotRestored)
        p.family(
            "relayd_state_journals_refused_total", .counter,
            help: "State journals refused at start-up (another boot, unknown version, damaged header, unreadable).")
        p.sample("relayd_state_journals_refused_total", [], m.stateJournalsRefused)
        p.family(
            "relayd_state_journal_write_failures_total", .counter,
            help: "Writes to the state journal that failed; what they carried would not survive a crash.")
        p.sample("relayd_state_journal_write_failures_total", [], m.stateJournalWriteFailures)
        p.family(
            "relayd_icmp_indications_total", .counter,
            help: "ICMP errors from peers passed to clients as Data indications with an ICMP attribute (RFC 8656 section 11.5).")
        p.sample("relayd_icmp_indications_total", [], c.icmpIndications)
        p.family(
            "relayd_mobility_total", .counter,
            help: "Refreshes with a mobility ticket from a new 5-tuple (RFC 8016), by outcome.")
        for outcome in MobilityOutcome.allCases {
            p.sample("relayd_mobility_total", [("outcome", outcome.label)], c.mobility[outcome.rawValue])
        }
        p.family("relayd_offloaded_channels", .gauge, help: "Channels installed in the kernel fast path.")
        p.sample("relayd_offloaded_channels", [], m.kernelRoutes)
        p.family(
            "relayd_offload_fallback_packets_total", .counter,
            help: "Packets of an offloaded channel the kernel left to relayd, by reason.")
        for (index, reason) in ["expired", "length_mismatch", "no_egress"].enumerated() {
            p.sample("relayd_offload_fallback_packets_total", [("reason", reason)], m.offloadFallback[index])
        }

        p.family("relayd_dropped_packets_total", .counter, help: "Packets dropped without an answer, by reason.")
        for reason in DropReason.allCases {
            p.sample("relayd_dropped_packets_total", [("reason", reason.label)], c.dropped(reason))
        }
        p.family("relayd_auth_results_total", .counter, help: "Results of authenticating STUN/TURN requests.")
        for outcome in AuthOutcome.allCases {
            p.sample("relayd_auth_results_total", [("result", outcome.label)], c.authenticated(outcome))
        }
        p.family("relayd_error_responses_total", .counter, help: "STUN/TURN error responses sent, by error code.")
        for error in RelayError.allCases {
            p.sample("relayd_error_responses_total", [("code", "\(error.code)")], c.errors(error))
        }
        p.family(
            "relayd_tcp_peer_connections_total", .counter,
            help: "Peer connections of TCP allocations (RFC 6062), by outcome.")
        for outcome in TCPConnectionOutcome.allCases {
            p.sample("relayd_tcp_peer_connections_total", [("outcome", outcome.label)], c.tcpConnections[outcome.rawValue])
        }
        p.family(
            "relayd_tcp_relayed_bytes_total", .counter,
            help: "Bytes piped between data connections and peer connections of TCP allocations (RFC 6062).")
        p.sample("relayd_tcp_relayed_bytes_total", [("direction", "to_peer")], c.tcpBytesToPeer)
        p.sample("relayd_tcp_relayed_bytes_total", [("direction", "to_client")], c.tcpBytesToClient)
        p.family(
            "relayd_tcp_spliced_pipes_total", .counter,
            help: "RFC 6062 pipes whose sockets were spliced in the kernel's sockmap (kernel-offload).")
        p.sample("relayd_tcp_spliced_pipes_total", [], m.splicedPipes)
        p.family(
            "relayd_tcp_spliced_bytes_total", .counter,
            help: "Bytes of RFC 6062 pipes the kernel redirected between their sockets (also in relayd_tcp_relayed_bytes_total).")
        p.sample("relayd_tcp_spliced_bytes_total", [("direction", "to_peer")], m.splicedBytesToPeer)
        p.sample("relayd_tcp_spliced_bytes_total", [("direction", "to_client")], m.splicedBytesToClient)
        p.family(
            "relayd_tcp_spliced_retransmitted_bytes_total", .counter,
            help: "Bytes at the head of a spliced socket's segments that the kernel program had seen before (retransmitted, or handed over again), taken out.")
        p.sample("relayd_tcp_spliced_retransmitted_bytes_total", [], m.splicedOldBytes)
        p.family("relayd_stun_binding_requests_total", .counter, help: "STUN Binding requests answered.")
        p.sample("relayd_stun_binding_requests_total", [], c.bindingRequests)

        p.family("relayd_relay_ports_in_use", .gauge, help: "Relay ports held by allocations and reservations.")
        p.sample("relayd_relay_ports_in_use", [], m.relayPortsInUse)
        p.family("relayd_relay_ports_free", .gauge, help: "Relay ports still free in min-port..max-port.")
        p.sample("relayd_relay_ports_free", [], m.relayPortsFree)
        p.family(
            "relayd_relay_ports_foreign", .gauge,
            help: "Relay ports another socket of the machine held, out of the search for up to a minute.")
        p.sample("relayd_relay_ports_foreign", [], m.relayPortsForeign)

        p.family("relayd_tls_handshakes_total", .counter, help: "TLS handshakes on TURN-over-TLS listeners, by result.")
        p.sample("relayd_tls_handshakes_total", [("result", "ok")], m.tlsHandshakesOK)
        p.sample("relayd_tls_handshakes_total", [("result", "failed")], m.tlsHandshakesFailed)
        p.family(
            "relayd_tls_own_records_total", .counter,
            help: "TLS sessions whose records relayd took over from OpenSSL after the handshake.")
        p.sample("relayd_tls_own_records_total", [], m.tlsOwnRecords)
        p.family(
            "relayd_dtls_handshakes_total", .counter,
            help: "DTLS handshakes of clients that passed the cookie exchange, by result.")
        p.sample("relayd_dtls_handshakes_total", [("result", "ok")], m.dtlsHandshakesOK)
        p.sample("relayd_dtls_handshakes_total", [("result", "failed")], m.dtlsHandshakesFailed)
        p.family(
            "relayd_dtls_restarts_total", .counter,
            help: "DTLS sessions their client restarted from the same address and port, by the new handshake's result.")
        p.sample("relayd_dtls_restarts_total", [("result", "ok")], m.dtlsRestartsOK)
        p.sample("relayd_dtls_restarts_total", [("result", "failed")], m.dtlsRestartsFailed)
        p.family(
            "relayd_dtls_session_hello_verify_requests_total", .counter,
            help: "HelloVerifyRequests from DTLS sessions' sockets for ClientHellos without a valid cookie.")
        p.sample("relayd_dtls_session_hello_verify_requests_total", [], m.dtlsSessionHelloVerifyRequests)
        p.family(
            "relayd_dtls_session_dropped_total", .counter,
            help:
                "Datagrams dropped on DTLS sessions' sockets before OpenSSL (not DTLS records, unusable "
                + "ClientHellos) and ICMP errors ignored there.")
        p.sample("relayd_dtls_session_dropped_total", [], m.dtlsSessionDrops)
        p.family(
            "relayd_dtls_shared_port_dropped_total", .counter,
            help: "Datagrams in DTLS's first-byte range dropped on UDP ports DTLS shares: no ClientHello, or too large.")
        p.sample("relayd_dtls_shared_port_dropped_total", [], m.dtlsSharedPortDrops)

        p.family(
            "relayd_stream_connections_refused_total", .counter,
            help: "TCP/TLS connections closed at accept, by the limit that refused them.")
        for refusal in StreamRefusal.allCases {
            p.sample(
                "relayd_stream_connections_refused_total", [("reason", refusal.label)],
                m.connectionsRefused[refusal.rawValue])
        }

        p.family(
            "relayd_stream_connections_accepted_total", .counter,
            help: "TCP/TLS client connections accepted, by transport (on a shared port, once the first byte said which).")
        for transport in [TransportProtocol.tcp, .tls] {
            p.sample(
                "relayd_stream_connections_accepted_total", [("transport", transport.label)],
                m.connectionsAccepted[Int(transport.rawValue)])
        }
        p.family(
            "relayd_stream_api_connections_total", .counter,
            help: "Connections on a TURN port that were the HTTP API's (the API shares the port).")
        p.sample("relayd_stream_api_connections_total", [], m.apiConnections)
        p.family("relayd_stream_connections_closed_total", .counter, help: "TCP/TLS client connections closed, by reason.")
        for reason in StreamCloseReason.allCases {
            p.sample("relayd_stream_connections_closed_total", [("reason", reason.label)], m.connectionsClosed[reason.rawValue])
        }

        p.family(
            "relayd_allocation_lifetime_seconds", .histogram,
            help: "How long TURN allocations lived, observed when they end.")
        p.histogram(
            "relayd_allocation_lifetime_seconds", bounds: LifetimeHistogram.bounds,
            cumulative: m.lifetimes.cumulativeCounts, sum: m.lifetimes.sum)

        p.family("relayd_credential_requests_total", .counter, help: "Credential service requests, by result.")
        for result in ServiceMetrics.CredentialResult.allCases {
            p.sample("relayd_credential_requests_total", [("result", result.label)], service.credentials(result))
        }
        p.family("relayd_admin_requests_total", .counter, help: "Admin API requests, by HTTP status.")
        for (status, count) in service.adminRequests.sorted(by: { $0.key < $1.key }) {
            p.sample("relayd_admin_requests_total", [("code", "\(status)")], count)
        }
        p.family("relayd_loop_threads", .gauge, help: "Event loop threads serving STUN/TURN.")
        p.sample("relayd_loop_threads", [], UInt64(max(0, service.loopThreads)))
        p.family("relayd_build_info", .gauge, help: "Always 1; the version label names the running build.")
        p.sample("relayd_build_info", [("version", String(RelaydVersion.string.split(separator: " ").last ?? ""))], 1)
        return p.text
    }
}
