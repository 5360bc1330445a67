import Glibc

/// A secret kept in a file of its own (docs/configuration.md, "Secrets in files"): a Kubernetes
/// Secret mounted as a volume, a systemd credential, a file only relayd's user can read. The
/// command line and the configuration file then name the file, never the secret, so the secret
/// shows in no process listing and no ConfigMap. One value a line; blank lines, lines starting
/// with `#`, and whitespace around a value are ignored.
enum SecretFile {
    /// A secret file is small: anything bigger is not one.
    static let maximumBytes = 64 << 10

    /// The file's values, in order; at least one.
    static func values(_ path: String?) throws(ConfigValueError) -> [String] {
        guard let path, !path.isEmpty else { throw ConfigValueError(expected: "the path of a file", missing: true) }
        // Non-blocking: a FIFO or a device named by mistake must not hold the process up.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            throw ConfigValueError(expected: "a readable file ('\(path)': \(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw ConfigValueError(expected: "a regular file ('\(path)' is not one)")
        }
        guard info.st_size <= maximumBytes else {
            throw ConfigValueError(expected: "a file of at most \(maximumBytes) bytes ('\(path)' has \(info.st_size))")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        guard let text = String(validating: bytes[..<done], as: UTF8.self) else {
            throw ConfigValueError(expected: "a UTF-8 text file ('\(path)' is not)")
        }
        let values = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: " \t\r") }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard !values.isEmpty else { throw ConfigValueError(expected: "a file holding a value ('\(path)' holds none)") }
        return values
    }

    /// A file that must hold exactly one value.
    static func value(_ path: String?) throws(ConfigValueError) -> String {
        let values = try values(path)
        guard values.count == 1 else {
            throw ConfigValueError(expected: "a file holding one value ('\(path ?? "")' holds \(values.count))")
        }
        return values[0]
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        let skip = Set(set)
        var text = self
        while let first = text.first, skip.contains(first) { text = text.dropFirst() }
        while let last = text.last, skip.contains(last) { text = text.dropLast() }
        return String(text)
    }
}
