import CoreFuzzing

/// journal-fuzz: the state journal's reader under libFuzzer (scripts/fuzz.sh), or a replay of
/// inputs in an ordinary build (`.build/debug/journal-fuzz fuzz-artifacts/journal/crash-...`).
// A closure, not `fuzzJournal` itself: naming the @_cdecl function here would emit its C symbol twice.
FuzzDriver.main(name: "journal-fuzz", libFuzzer: { data, size in fuzzJournal(data, size) }) { bytes in
    bytes.withUnsafeBytes { JournalFuzzSession().run($0) }
}
