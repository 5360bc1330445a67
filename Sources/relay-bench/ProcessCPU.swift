import Glibc

/// CPU time of a thread: the calling one (CLOCK_THREAD_CPUTIME_ID), or another thread of this
/// process through its clock (pthread_getcpuclockid).
enum ThreadCPU {
    static func seconds() -> Double { seconds(clock: CLOCK_THREAD_CPUTIME_ID) ?? 0 }

    /// Seconds on `clock`; nil when it cannot be read (the thread has ended).
    static func seconds(clock: clockid_t) -> Double? {
        var ts = timespec()
        guard clock_gettime(clock, &ts) == 0 else { return nil }
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// CPU time and memory of a process, read from /proc (the server's) or getrusage (our own).
enum ProcessCPU {
    /// utime + stime of process `pid` in seconds (all threads), from /proc/PID/stat.
    static func seconds(pid: Int32) -> Double? {
        guard let text = readFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // Fields after "comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Busy CPU seconds of the whole machine, all CPUs (user, nice, system, irq, softirq and steal
    /// from /proc/stat): what a relay costs when the kernel does part of its work in softirq,
    /// which no process is charged for.
    static func systemSeconds() -> Double? {
        guard let text = readFile("/proc/stat"), let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let f = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard f.count >= 8 else { return nil }
        return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS of process `pid` in bytes, from /proc/PID/status.
    static func residentBytes(pid: Int32) -> Int? {
        guard let text = readFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
        }
        return nil
    }

    /// This process's user + system CPU seconds (all threads).
    static func ownSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// A small text file's contents.
    static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
