/// Where a configuration entry came from, for messages that name it.
public enum ConfigSource: Hashable, Sendable {
    /// A line of a `turnserver.conf`-style file (lines count from 1).
    case file(path: String, line: Int)
    /// An argument of the command line.
    case commandLine
}

extension ConfigSource: CustomStringConvertible {
    /// `path:line` for a file, `command line` for an argument.
    public var description: String {
        switch self {
        case .file(let path, let line): return "\(path):\(line)"
        case .commandLine: return "command line"
        }
    }
}
