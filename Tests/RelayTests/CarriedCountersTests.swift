import Testing

@testable import Relay

/// A live upgrade's heir counts on from its predecessor's `/metrics` page (docs/live-upgrade.md,
/// "Metrics"): counters and histograms of relayd's families are carried, gauges and process
/// metrics are not, and a page that is not one relayd writes is read with bounds.
@Suite struct CarriedCountersTests {
    private func page(_ build: (inout PrometheusText) -> Void) -> String {
        var p = PrometheusText()
        build(&p)
        return p.text
    }

    @Test("Counters and histograms are carried, gauges and process metrics are not")
    func whatIsCarried() {
        let old = page { p in
            p.family("relayd_allocations_created_total", .counter, help: "created")
            p.sample("relayd_allocations_created_total", [], 100)
            p.family("relayd_relayed_packets_total", .counter, help: "relayed")
            p.sample("relayd_relayed_packets_total", [("direction", "client_to_peer")], 7)
            p.family("relayd_allocations_active", .gauge, help: "live")
            p.sample("relayd_allocations_active", [], 40)
            p.family("relayd_allocation_lifetime_seconds", .histogram, help: "lifetimes")
            p.histogram("relayd_allocation_lifetime_seconds", bounds: [60], cumulative: [2], sum: 30)
            p.family("process_open_fds", .counter, help: "not relayd's")
            p.sample("process_open_fds", [], 9)
        }
        let carried = CarriedCounters(page: old)
        #expect(carried.skipped == 0)
        #expect(carried.value(of: "relayd_allocations_created_total") == 100)
        #expect(carried.value(of: #"relayd_relayed_packets_total{direction="client_to_peer"}"#) == 7)
        #expect(carried.value(of: #"relayd_allocation_lifetime_seconds_bucket{le="60"}"#) == 2)
        #expect(carried.value(of: "relayd_allocation_lifetime_seconds_count") == 2)
        #expect(carried.value(of: "relayd_allocations_active") == 0)
        #expect(carried.value(of: "process_open_fds") == 0)

        let now = page { p in
            p.carried = carried
            p.family("relayd_allocations_created_total", .counter, help: "created")
            p.sample("relayd_allocations_created_total", [], 1)
            p.family("relayd_relayed_packets_total", .counter, help: "relayed")
            p.sample("relayd_relayed_packets_total", [("direction", "client_to_peer")], 3)
            p.sample("relayd_relayed_packets_total", [("direction", "peer_to_client")], 4)
            p.family("relayd_allocations_active", .gauge, help: "live")
            p.sample("relayd_allocations_active", [], 41)
        }
        #expect(now.contains("\nrelayd_allocations_created_total 101\n"))
        #expect(now.contains(#"relayd_relayed_packets_total{direction="client_to_peer"} 10"#))
        #expect(now.contains(#"relayd_relayed_packets_total{direction="peer_to_client"} 4"#))
        #expect(now.contains("\nrelayd_allocations_active 41\n"))
    }

    @Test("Lines that are not samples, or past the bounds, are skipped and counted")
    func badPage() {
        let long = "relayd_x_total{l=\"" + String(repeating: "a", count: 2000) + "\"} 1"
        let text = """
            # TYPE relayd_x_total counter
            relayd_x_total -5
            relayd_x_total 1.5
            relayd_x_total
            \(long)
            relayd_x_total{a="b"} 18446744073709551615
            relayd_x_total{a="b"} 2
            # TYPE relayd_y_total counter extra words
            relayd_y_total 3
            """
        let carried = CarriedCounters(page: text)
        #expect(carried.skipped == 4)
        // Two samples of one series (a page writes each once) wrap rather than trap.
        #expect(carried.value(of: #"relayd_x_total{a="b"}"#) == 1)
        #expect(carried.value(of: "relayd_y_total") == 0)
        #expect(CarriedCounters(page: "").isEmpty)
    }

    @Test("At most maxSeries series are taken")
    func bounded() {
        var text = "# TYPE relayd_x_total counter\n"
        for i in 0..<(CarriedCounters.maxSeries + 10) { text += "relayd_x_total{i=\"\(i)\"} 1\n" }
        let carried = CarriedCounters(page: text)
        #expect(carried.values.count == CarriedCounters.maxSeries)
        #expect(carried.skipped == 10)
    }
}
