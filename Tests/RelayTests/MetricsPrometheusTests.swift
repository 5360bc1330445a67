import Relay
import RelayCore
import StunCodec
import Testing

/// `/metrics` is the Prometheus text format (0.0.4): HELP and TYPE once per family, counters
/// ending in `_total`, bounded labels, histogram buckets cumulative up to `+Inf`.
@Suite struct MetricsPrometheusTests {
    static func sample() -> (LoopMetrics, ServiceMetrics) {
        var m = LoopMetrics()
        m.counters.bindingRequests = 7
        m.counters.allocationsCreated = 5
        m.counters.allocationsExpired = 1
        m.counters.allocationsDeleted = 2
        m.counters.packetsToPeer = 10
        m.counters.bytesToPeer = 1000
        m.counters.packetsToClient = 11
        m.counters.bytesToClient = 1100
        m.counters.drop(.noPermission)
        m.counters.drop(.noPermission)
        m.counters.auth[AuthOutcome.challenged.rawValue] = 3
        m.counters.errorResponses[RelayError.allCases.firstIndex(of: .unauthorized)!] = 3
        m.allocationsActive[LoopMetrics.allocationIndex(.udp, .ipv4)] = 2
        m.allocationsActive[LoopMetrics.allocationIndex(.tcp, .ipv6)] = 1
        m.permissionsActive = 4
        m.channelsActive = 3
        m.relayPortsInUse = 3
        m.relayPortsFree = 97
        m.lifetimes.observe(seconds: 5)
        m.lifetimes.observe(seconds: 45)
        m.lifetimes.observe(seconds: 100_000)
        var service = ServiceMetrics(loopThreads: 2)
        service.count(.issued)
        service.count(.unauthorized)
        return (m, service)
    }

    static func lines() -> [String] {
        let (m, service) = sample()
        return RelaydMetrics.render(m, service: service).split(separator: "\n").map(String.init)
    }

    @Test("Values appear under their names and labels")
    func values() {
        let lines = Set(Self.lines())
        for expected in [
            #"relayd_allocations_active{transport="udp",family="ipv4"} 2"#,
            #"relayd_allocations_active{transport="tcp",family="ipv6"} 1"#,
            #"relayd_allocations_active{transport="tls",family="ipv4"} 0"#,
            "relayd_allocations_created_total 5", "relayd_allocations_expired_total 1",
            "relayd_allocations_deleted_total 2",
            "relayd_permissions_active 4", "relayd_channels_active 3",
            #"relayd_relayed_packets_total{direction="client_to_peer"} 10"#,
            #"relayd_relayed_packets_total{direction="peer_to_client"} 11"#,
            #"relayd_relayed_bytes_total{direction="client_to_peer"} 1000"#,
            #"relayd_relayed_bytes_total{direction="peer_to_client"} 1100"#,
            #"relayd_dropped_packets_total{reason="no_permission"} 2"#,
            #"relayd_dropped_packets_total{reason="malformed"} 0"#,
            #"relayd_auth_results_total{result="challenge"} 3"#,
            #"relayd_error_responses_total{code="401"} 3"#,
            #"relayd_error_responses_total{code="508"} 0"#,
            "relayd_stun_binding_requests_total 7",
            "relayd_relay_ports_in_use 3", "relayd_relay_ports_free 97", "relayd_relay_ports_foreign 0",
            #"relayd_tls_handshakes_total{result="ok"} 0"#, #"relayd_tls_handshakes_total{result="failed"} 0"#,
            #"relayd_stream_connections_refused_total{reason="pending_per_ip_limit"} 0"#,
            #"relayd_credential_requests_total{result="issued"} 1"#,
            #"relayd_credential_requests_total{result="unauthorized"} 1"#,
            "relayd_loop_threads 2",
        ] {
            #expect(lines.contains(expected), "missing: \(expected)")
        }
    }

    @Test("Every drop reason, auth result and error code is present, so dashboards see zeros")
    func everyLabelPresent() {
        let text = Self.lines().joined(separator: "\n")
        for reason in DropReason.allCases { #expect(text.contains(#"reason="\#(reason.label)""#)) }
        for outcome in AuthOutcome.allCases { #expect(text.contains(#"result="\#(outcome.label)""#)) }
        for error in RelayError.allCases { #expect(text.contains(#"code="\#(error.code)""#)) }
    }

    @Test("The histogram's buckets are cumulative and +Inf equals _count")
    func histogram() {
        let lines = Set(Self.lines())
        #expect(lines.contains(#"relayd_allocation_lifetime_seconds_bucket{le="10"} 1"#))
        #expect(lines.contains(#"relayd_allocation_lifetime_seconds_bucket{le="30"} 1"#))
        #expect(lines.contains(#"relayd_allocation_lifetime_seconds_bucket{le="60"} 2"#))
        #expect(lines.contains(#"relayd_allocation_lifetime_seconds_bucket{le="86400"} 2"#))
        #expect(lines.contains(#"relayd_allocation_lifetime_seconds_bucket{le="+Inf"} 3"#))
        #expect(lines.contains("relayd_allocation_lifetime_seconds_sum 100050"))
        #expect(lines.contains("relayd_allocation_lifetime_seconds_count 3"))
    }

    @Test("Each family has one HELP and one TYPE line before its samples; counters end in _total, gauges do not")
    func structure() throws {
        var declared: [String: String] = [:]
        var current: String? = nil
        for line in Self.lines() {
            if line.hasPrefix("# HELP ") {
                let name = String(line.dropFirst(7).prefix { $0 != " " })
                #expect(declared[name] == nil, "HELP twice for \(name)")
                current = name
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                let name = String(parts[2])
                #expect(name == current)
                declared[name] = String(parts[3])
            } else {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                let family = try #require(current)
                #expect(name == family || (declared[family] == "histogram" && name.hasPrefix(family + "_")), "\(line)")
                #expect(name.hasPrefix("relayd_"))
                #expect(
                    line.range(
                        of: #"^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9]+$"#, options: .regularExpression)
                        != nil, "\(line)")
            }
        }
        for (name, type) in declared {
            #expect((type == "counter") == name.hasSuffix("_total"), "\(name) is a \(type)")
        }
        #expect(declared.count == 53)
    }

    @Test("Label values and HELP text are escaped")
    func escaping() {
        var p = PrometheusText()
        p.family("x_total", .counter, help: "a\\b\nc")
        p.sample("x_total", [("l", "q\"b\\n\nx")], 1)
        #expect(p.text == "# HELP x_total a\\\\b\\nc\n# TYPE x_total counter\nx_total{l=\"q\\\"b\\\\n\\nx\"} 1\n")
    }
}
