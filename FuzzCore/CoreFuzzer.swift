import CoreFuzzing
import RelayCore

/// libFuzzer's entry point (https://llvm.org/docs/LibFuzzer.html): one input as a sequence of
/// operations on a fresh `RelayCore` (FuzzSession). Refused packets are fine; a crash, an
/// over-read (AddressSanitizer) or a broken invariant is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCore(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let failures = FuzzSession().run(UnsafeRawBufferPointer(start: data, count: size))
    if let first = failures.first {
        fatalError("core fuzz invariant: \(first)" + (failures.count > 1 ? " (+\(failures.count - 1) more)" : ""))
    }
    return 0
}
