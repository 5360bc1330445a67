import CoreFuzzing
import RelayCore

/// core-fuzz: the RelayCore state machine under libFuzzer (scripts/fuzz.sh), or a replay of
/// inputs in an ordinary build (`.build/debug/core-fuzz fuzz-artifacts/core/crash-...`).
// A closure, not `fuzzCore` itself: naming the @_cdecl function here would emit its C symbol twice.
FuzzDriver.main(name: "core-fuzz", libFuzzer: { data, size in fuzzCore(data, size) }) { bytes in
    bytes.withUnsafeBytes { FuzzSession().run($0) }
}
