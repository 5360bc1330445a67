import Glibc

/// Unbuffered writes to stdout and stderr (Swift 6 forbids touching the C `stdout`/`stderr`
/// globals, and results must reach a pipe at once).
enum Output {
    static func out(_ text: String) { write(1, text + "\n") }
    static func err(_ text: String) { write(2, text + "\n") }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n <= 0 { break }
                done += n
            }
        }
    }
}
