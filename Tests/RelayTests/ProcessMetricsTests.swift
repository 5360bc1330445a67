import Foundation
import Glibc
import Relay
import Testing

/// The standard `process_` metrics read from this test process, and how they print.
@Suite struct ProcessMetricsTests {
    @Test("This process's numbers are plausible, and opened files show in process_open_fds")
    func current() throws {
        let before = ProcessMetrics.current()
        #expect(before.cpuSeconds > 0)
        #expect(before.residentBytes > 1_000_000 && before.virtualBytes >= before.residentBytes)
        #expect(before.openFDs > 2 && before.openFDs <= before.maxFDs)
        let now = Date().timeIntervalSince1970
        #expect(before.startTime > now - 86_400 && before.startTime <= now + 1)
        // Other tests open and close sockets meanwhile: 64 more descriptors must show, give or take.
        let opened = (0..<64).map { _ in open("/dev/null", O_RDONLY) }
        defer { for fd in opened where fd >= 0 { close(fd) } }
        try #require(opened.allSatisfy { $0 >= 0 })
        #expect(ProcessMetrics.current().openFDs >= before.openFDs + 48)
    }

    @Test("They print as the client libraries' families, fractions where the value has them")
    func text() {
        let metrics = ServerMetrics(
            process: ProcessMetrics(
                cpuSeconds: 1.25, residentBytes: 4096, virtualBytes: 8192, openFDs: 9, maxFDs: 1024,
                startTime: 1_790_000_000.5),
            openStreamConnections: 3, certificateExpiry: 1_866_833_787)
        let text = metrics.prometheus()
        for line in [
            "process_cpu_seconds_total 1.25", "process_resident_memory_bytes 4096", "process_virtual_memory_bytes 8192",
            "process_open_fds 9", "process_max_fds 1024", "process_start_time_seconds 1790000000.5",
            "relayd_stream_connections_open 3", "relayd_tls_certificate_expiry_timestamp_seconds 1866833787",
            "# TYPE process_cpu_seconds_total counter",
        ] {
            #expect(text.contains(line + "\n"), "\(line)")
        }
        let withoutTLS = ServerMetrics(process: metrics.process, openStreamConnections: 0, certificateExpiry: nil)
        #expect(!withoutTLS.prometheus().contains("certificate"))
    }
}
