#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Built by scripts/fuzz.sh (-sanitize=fuzzer,address -D RELAYD_LIBFUZZER), this hands control
/// to libFuzzer with its usual command line (corpus directories, -max_total_time=...). In an
/// ordinary build it replays the files and directories it is given through the same checks, so
/// a crash input from fuzz-artifacts/ reproduces in the debugger:
/// `swift build --product stun-fuzz && .build/debug/stun-fuzz fuzz-artifacts/decoder/crash-...`.
#if RELAYD_LIBFUZZER
    @_extern(c, "LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    // A closure, not `fuzzDecoders` itself: naming the @_cdecl function here would emit its C symbol twice.
    exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzDecoders(data, size) })
#else
    let paths = CommandLine.arguments.dropFirst()
    if paths.isEmpty {
        print("usage: stun-fuzz FILE|DIR...   (replays inputs; scripts/fuzz.sh builds the libFuzzer binary)")
        exit(2)
    }
    var replayed = 0
    for path in paths {
        for file in InputFiles.list(path) {
            guard let bytes = InputFiles.read(file) else {
                print("stun-fuzz: cannot read \(file)")
                exit(1)
            }
            _ = bytes.withUnsafeBufferPointer { fuzzDecoders($0.baseAddress, $0.count) }
            replayed += 1
        }
    }
    print("stun-fuzz: replayed \(replayed) inputs, no invariant broken")
#endif
