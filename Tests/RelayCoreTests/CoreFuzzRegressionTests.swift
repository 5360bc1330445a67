import CoreFuzzing
import RelayCore
import StunCodec
import Testing

/// The core fuzzer's corpus as a regression suite: every file in FuzzCore/corpus/core
/// (seeds and committed crash inputs) replayed through the same operation decoder and
/// invariants as core-fuzz (FuzzSession.swift), without sanitizers.
@Suite struct CoreFuzzRegressionTests {
    /// The repository: three directories up from this file.
    static let root = String(#filePath).split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")
    static let corpus = root + "/FuzzCore/corpus/core"

    /// The names of the corpus's files (none when the directory is missing).
    static var inputs: [String] {
        InputFiles.list(corpus).filter { $0.hasPrefix(corpus + "/") }.map { String($0.dropFirst(corpus.count + 1)) }
    }

    /// A corpus file's bytes.
    static func read(_ name: String) throws -> [UInt8] {
        guard let bytes = InputFiles.read(corpus + "/" + name) else { throw Unreadable(path: corpus + "/" + name) }
        return bytes
    }

    struct Unreadable: Error { var path: String }

    @Test("The corpus is there") func corpusPresent() {
        #expect(Self.inputs.count >= 5, "FuzzCore/corpus/core holds \(Self.inputs.count) files")
    }

    @Test("The seeds reach the paths they are named for: a mobility move, ICMP indications, cluster quota checks")
    func seedsReachTheirPaths() throws {
        func counters(_ name: String) throws -> CoreCounters {
            let bytes = try Self.read(name)
            let session = FuzzSession()
            _ = bytes.withUnsafeBytes { session.run($0) }
            return session.counters
        }
        #expect(try counters("seed-mobility").mobility[MobilityOutcome.moved.rawValue] == 1)
        #expect(try counters("seed-icmp-errors").icmpIndications >= 1)
        let cluster = try counters("seed-cluster")
        #expect(cluster.allocationsCreated >= 2, "granted and local answers allocate")
        #expect(cluster.errors(.allocationQuotaReached) >= 1 && cluster.errors(.insufficientCapacity) >= 1)
    }

    @Test("Every corpus input keeps the core's invariants", arguments: inputs)
    func replay(name: String) throws {
        let bytes = try Self.read(name)
        let failures = bytes.withUnsafeBytes { FuzzSession().run($0) }
        #expect(failures.isEmpty, "\(name): \(failures)")
    }
}
