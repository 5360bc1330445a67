import CoreFuzzing

/// libFuzzer's entry point (https://llvm.org/docs/LibFuzzer.html): one input read as a state
/// journal (JournalFuzzInput, JournalFuzzSession). Refused journals and dropped records are fine;
/// a crash, an over-read (AddressSanitizer) or a broken invariant is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournal(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let failures = JournalFuzzSession().run(UnsafeRawBufferPointer(start: data, count: size))
    if let first = failures.first {
        fatalError("journal fuzz invariant: \(first)" + (failures.count > 1 ? " (+\(failures.count - 1) more)" : ""))
    }
    return 0
}
