// swift-tools-version:6.2
import PackageDescription

let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "relayd",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "StunCodec", targets: ["StunCodec"]),
        .library(name: "RelayCore", targets: ["RelayCore"]),
        .library(name: "Relay", targets: ["Relay"]),
        .executable(name: "relayd", targets: ["relayd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"])]
        ),
        // libcrypto alone, for the codec's digests and AES-GCM sealed boxes; its headers come with
        // libssl-dev. TLS (libssl) is COpenSSL's, which only `Relay` and relay-bench import.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // Redis for the cluster's shared state (docs/cluster.md), with hiredis's libevent adapter.
        // No pkgConfig: hiredis.pc's -D_FILE_OFFSET_BITS=64 is a flag SwiftPM refuses, and the
        // headers live under the default include path (<hiredis/...>).
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // SQLite's C library: coturn's user database (docs/userdb.md).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq: coturn's user database in PostgreSQL (docs/userdb.md).
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CBPF",
            pkgConfig: "libbpf",
            providers: [.apt(["libbpf-dev"])]
        ),
        // The kernel fast path's map layouts (shared with the BPF program in bpf/, which
        // scripts/build-bpf.sh compiles with clang -target bpf) and the libbpf calls Swift cannot
        // make itself (LIBBPF_OPTS).
        .target(
            name: "CRelayFastPath",
            dependencies: ["CBPF"],
            exclude: ["bpf"]
        ),
        // A TCP/TLS connection's socket-side buffers and the OpenSSL BIO over them (C callbacks
        // that OpenSSL calls per record), and the HTTPS API's OpenSSL bufferevents.
        .target(
            name: "CStreamIO",
            dependencies: ["COpenSSL"],
            // The HTTPS API's bufferevents (https_bev.c): libevent's OpenSSL layer.
            linkerSettings: [.linkedLibrary("event_openssl"), .linkedLibrary("event_core")]
        ),
        // A live upgrade's descriptor passing (SCM_RIGHTS) and the heir's posix_spawn
        // (docs/live-upgrade.md).
        .target(name: "CHandover"),
        .target(
            name: "StunCodec",
            dependencies: ["CCrypto"],
            swiftSettings: strict
        ),
        // The protocol state machine (RFC 8489, RFC 8656): pure Swift, no C module, no
        // Foundation; it emits commands the I/O layer in `Relay` executes (docs/architecture.md).
        .target(
            name: "RelayCore",
            dependencies: ["StunCodec", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // The kernel fast path (docs/kernel-fast-path.md): loads relayd's BPF program, attaches it,
        // and executes the core's channel route commands into its maps. The only Swift target that
        // calls libbpf (scripts/check-layers.sh).
        .target(
            name: "FastPath",
            dependencies: [
                "StunCodec", "RelayCore", "CBPF", "CRelayFastPath", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Relay",
            dependencies: [
                "StunCodec", "RelayCore", "FastPath", "CLibevent", "COpenSSL", "CStreamIO", "CHiredis", "CHandover", "CSQLite", "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "relayd",
            dependencies: [
                "Relay", "StunCodec",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The core fuzzer's operation decoder and invariants (FuzzSession, also replayed over the
        // corpus by RelayCoreTests), the journal fuzzer's (JournalFuzzSession, likewise), and what
        // the fuzz targets share: the libFuzzer driver/replay main and input files. The core and
        // the codec only: no C module but libc.
        .target(
            name: "CoreFuzzing",
            dependencies: ["RelayCore", "StunCodec", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // Decoder fuzzer: libFuzzer entry in Fuzz/; scripts/fuzz.sh builds it with -sanitize=fuzzer,address.
        .executableTarget(
            name: "stun-fuzz",
            dependencies: ["StunCodec", "CoreFuzzing"],
            path: "Fuzz",
            exclude: ["corpus", "make_corpus.py"],
            swiftSettings: strict
        ),
        // Counts heap allocations by interposing malloc and friends; only stun-bench links it.
        .target(name: "CMallocCounter"),
        .executableTarget(
            name: "stun-bench",
            dependencies: [
                "StunCodec", "Relay", "CMallocCounter", "CStreamIO", "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The kernel fast path program's cost per packet (BPF_PROG_TEST_RUN), for docs and notes.
        .executableTarget(
            name: "fastpath-bench",
            dependencies: ["FastPath", "RelayCore", "StunCodec", "CRelayFastPath"],
            swiftSettings: strict
        ),
        // One side of the benchmark's kernel load generator (scripts/bench-fastpath.sh): BPF
        // live-frames transmit and an XDP sink, for rates user-space endpoints cannot offer.
        .executableTarget(
            name: "kernel-loadgen",
            dependencies: ["StunCodec", "CBPF", "CRelayFastPath"],
            swiftSettings: strict
        ),
        // TURN load generator for scripts/bench.sh (relayd vs coturn, same run).
        .executableTarget(
            name: "relay-bench",
            dependencies: ["StunCodec", "CLibevent", "COpenSSL"],
            swiftSettings: strict
        ),
        // Core state-machine fuzzer: arbitrary datagrams from arbitrary 5-tuples, manual clock.
        // No `Relay`, so it links neither libssl, libevent, hiredis nor libbpf; the codec brings
        // libcrypto alone (scripts/check-layers.sh).
        .executableTarget(
            name: "core-fuzz",
            dependencies: ["RelayCore", "StunCodec", "CoreFuzzing"],
            path: "FuzzCore",
            exclude: ["corpus"],
            swiftSettings: strict
        ),
        // State journal fuzzer (docs/state-journal.md): arbitrary journals, and arbitrary records
        // framed with good CRCs, through the reader; the core and the codec alone, like core-fuzz.
        .executableTarget(
            name: "journal-fuzz",
            dependencies: ["RelayCore", "StunCodec", "CoreFuzzing"],
            path: "FuzzJournal",
            exclude: ["corpus"],
            swiftSettings: strict
        ),
        .testTarget(name: "StunCodecTests", dependencies: ["StunCodec"], swiftSettings: strict),
        // What the core's tests and Relay's share: `CoreHarness` (a `RelayCore` with fake relay
        // sockets and a manual clock, its context built by `CoreFixture` from the core's own
        // types), the STUN messages and the TURN client they send. Imported `@testable`.
        .target(
            name: "CoreTestSupport",
            dependencies: ["RelayCore", "StunCodec", .product(name: "Logging", package: "swift-log")],
            path: "Tests/CoreTestSupport",
            swiftSettings: strict
        ),
        // The protocol core's tests: no `Relay` behind them, so no libssl, libevent, hiredis or
        // libbpf (scripts/check-layers.sh checks their imports and dependencies).
        .testTarget(
            name: "RelayCoreTests",
            dependencies: [
                "RelayCore", "StunCodec", "CoreFuzzing", "CoreTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The I/O layer's, configuration's and daemon's tests; CoreFuzzing for FuzzSession's parity
        // with the configuration (CoreFixtureParityTests).
        .testTarget(
            name: "RelayTests",
            dependencies: ["Relay", "FastPath", "StunCodec", "RelayCore", "CoreTestSupport", "CoreFuzzing", "CSQLite"],
            swiftSettings: strict
        ),
    ]
)
