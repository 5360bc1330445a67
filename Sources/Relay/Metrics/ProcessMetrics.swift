import Glibc

/// The process metrics every Prometheus client library exports by default (the `process_`
/// family of the Prometheus client guidelines), read from `/proc/self` and `getrlimit` at scrape
/// time, so dashboards and alerts written for any exporter work on relayd too.
public struct ProcessMetrics: Sendable, Equatable {
    public var cpuSeconds: Double
    public var residentBytes: UInt64
    public var virtualBytes: UInt64
    public var openFDs: UInt64
    public var maxFDs: UInt64
    /// Unix time the process started.
    public var startTime: Double

    public init(
        cpuSeconds: Double, residentBytes: UInt64, virtualBytes: UInt64, openFDs: UInt64, maxFDs: UInt64,
        startTime: Double
    ) {
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
        self.virtualBytes = virtualBytes
        self.openFDs = openFDs
        self.maxFDs = maxFDs
        self.startTime = startTime
    }

    /// This process now; fields `/proc` cannot give stay 0.
    public static func current() -> ProcessMetrics {
        let page = UInt64(max(0, sysconf(Int32(_SC_PAGESIZE))))
        // statm: size resident shared text lib data dt (pages).
        let statm = (readFile("/proc/self/statm") ?? "").split(separator: " ").compactMap { UInt64($0) }
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        return ProcessMetrics(
            cpuSeconds: cpuSeconds(),
            residentBytes: statm.count > 1 ? statm[1] * page : 0, virtualBytes: statm.first.map { $0 * page } ?? 0,
            openFDs: countOpenFDs(), maxFDs: limit.rlim_cur == rlim_t.max ? UInt64(Int64.max) : UInt64(limit.rlim_cur),
            startTime: startTime())
    }

    public func render(into p: inout PrometheusText) {
        p.family("process_cpu_seconds_total", .counter, help: "Total user and system CPU time spent in seconds.")
        p.sample("process_cpu_seconds_total", double: cpuSeconds)
        p.family("process_resident_memory_bytes", .gauge, help: "Resident memory size in bytes.")
        p.sample("process_resident_memory_bytes", [], residentBytes)
        p.family("process_virtual_memory_bytes", .gauge, help: "Virtual memory size in bytes.")
        p.sample("process_virtual_memory_bytes", [], virtualBytes)
        p.family("process_open_fds", .gauge, help: "Number of open file descriptors.")
        p.sample("process_open_fds", [], openFDs)
        p.family("process_max_fds", .gauge, help: "Maximum number of open file descriptors.")
        p.sample("process_max_fds", [], maxFDs)
        p.family("process_start_time_seconds", .gauge, help: "Start time of the process since unix epoch in seconds.")
        p.sample("process_start_time_seconds", double: startTime)
    }

    /// User and system CPU this process has used, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static func countOpenFDs() -> UInt64 {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(dir) }
        var count: UInt64 = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in raw.prefix { $0 != 0 } }
            if !(name.elementsEqual([0x2E]) || name.elementsEqual([0x2E, 0x2E])) { count += 1 }
        }
        // The directory stream's own descriptor is counted too.
        return count > 0 ? count - 1 : 0
    }

    /// From field 22 of /proc/self/stat (clock ticks after boot) and `btime` of /proc/stat.
    static func startTime() -> Double {
        guard let stat = readFile("/proc/self/stat"), let close = stat.lastIndex(of: ")"),
            let system = readFile("/proc/stat")
        else { return 0 }
        // After "pid (comm)", field 3 (state) is the first: starttime is field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return 0 }
        guard let line = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst("btime ".count))
        else { return 0 }
        return boot + ticks / Double(max(1, sysconf(Int32(_SC_CLK_TCK))))
    }

    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer.prefix(n)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
