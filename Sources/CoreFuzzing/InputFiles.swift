#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reading replay inputs without Foundation: a path is a file, or a directory of files.
public enum InputFiles {
    /// `path` itself, or the regular files directly inside it, sorted.
    public static func list(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [path] }
        defer { closedir(dir) }
        var files: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            files.append(path + "/" + name)
        }
        return files.sorted()
    }

    public static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return ferror(file) == 0 ? bytes : nil
    }
}
