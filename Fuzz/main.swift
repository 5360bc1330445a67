import CoreFuzzing

/// stun-fuzz: the StunCodec decoders and stream framer under libFuzzer (scripts/fuzz.sh), or a
/// replay of inputs in an ordinary build (`.build/debug/stun-fuzz fuzz-artifacts/decoder/crash-...`).
// A closure, not `fuzzDecoders` itself: naming the @_cdecl function here would emit its C symbol twice.
FuzzDriver.main(name: "stun-fuzz", libFuzzer: { data, size in fuzzDecoders(data, size) }) { bytes in
    _ = bytes.withUnsafeBufferPointer { fuzzDecoders($0.baseAddress, $0.count) }
    return []
}
