#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Built by scripts/fuzz.sh (-sanitize=fuzzer,address -D RELAYD_LIBFUZZER), this hands control
/// to libFuzzer with its usual command line. In an ordinary build it replays the files and
/// directories it is given through the same operations and invariants (FuzzSession.swift), so
/// a crash input reproduces in the debugger:
/// `swift build --product core-fuzz && .build/debug/core-fuzz fuzz-artifacts/core/crash-...`.
#if RELAYD_LIBFUZZER
    @_extern(c, "LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    // A closure, not `fuzzCore` itself: naming the @_cdecl function here would emit its C symbol twice.
    exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzCore(data, size) })
#else
    let paths = CommandLine.arguments.dropFirst()
    if paths.isEmpty {
        print("usage: core-fuzz FILE|DIR...   (replays inputs; scripts/fuzz.sh builds the libFuzzer binary)")
        exit(2)
    }
    var replayed = 0
    for path in paths {
        for file in InputFiles.list(path) {
            guard let bytes = InputFiles.read(file) else {
                print("core-fuzz: cannot read \(file)")
                exit(1)
            }
            let failures = bytes.withUnsafeBytes { FuzzSession().run($0) }
            if !failures.isEmpty {
                print("core-fuzz: \(file): \(failures.joined(separator: "; "))")
                exit(1)
            }
            replayed += 1
        }
    }
    print("core-fuzz: replayed \(replayed) inputs, no invariant broken")
#endif
