#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

#if RELAYD_LIBFUZZER
    @_extern(c, "LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32
#endif

/// The `main` of every fuzz target. Built by scripts/fuzz.sh (-sanitize=fuzzer,address
/// -D RELAYD_LIBFUZZER) it hands control to libFuzzer with its usual command line (corpus
/// directories, -max_total_time=...). In an ordinary build it replays the files and directories
/// it is given through `replay` (which returns what went wrong, if anything), so a crash input
/// from fuzz-artifacts/ reproduces in the debugger: `swift build --product NAME && .build/debug/NAME FILE`.
public enum FuzzDriver {
    public static func main(
        name: String, libFuzzer testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32,
        replay: ([UInt8]) -> [String]
    ) -> Never {
        #if RELAYD_LIBFUZZER
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
            let paths = CommandLine.arguments.dropFirst()
            if paths.isEmpty {
                print("usage: \(name) FILE|DIR...   (replays inputs; scripts/fuzz.sh builds the libFuzzer binary)")
                exit(2)
            }
            var replayed = 0
            for path in paths {
                for file in InputFiles.list(path) {
                    guard let bytes = InputFiles.read(file) else {
                        print("\(name): cannot read \(file)")
                        exit(1)
                    }
                    let failures = replay(bytes)
                    if !failures.isEmpty {
                        print("\(name): \(file): \(failures.joined(separator: "; "))")
                        exit(1)
                    }
                    replayed += 1
                }
            }
            print("\(name): replayed \(replayed) inputs, no invariant broken")
            exit(0)
        #endif
    }
}
