/// PASSWORD-ALGORITHMS: the key-derivation algorithms the server supports, in order of
/// preference, each with its parameters padded to 4 bytes (RFC 8489 §14.11). A truncated entry
/// is `.badAttributeLength`.
public struct PasswordAlgorithms: StunAttributeValue, Hashable {
    public var algorithms: [PasswordAlgorithm]

    public init(algorithms: [PasswordAlgorithm]) { self.algorithms = algorithms }

    public static var attributeType: AttributeType { .passwordAlgorithms }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        var algorithms: [PasswordAlgorithm] = []
        var offset = 0
        while offset < value.count {
            algorithms.append(try PasswordAlgorithm.decodeElement(value, at: &offset, type: Self.attributeType))
        }
        self.algorithms = algorithms
    }

    public var encodedLength: Int { algorithms.reduce(0) { $0 + $1.paddedLength } }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        var offset = 0
        for algorithm in algorithms {
            let end = offset + algorithm.paddedLength
            let slot = UnsafeMutableRawBufferPointer(rebasing: value[offset..<end])
            algorithm.encodeElement(into: slot)
            for i in (4 + algorithm.parameters.count)..<slot.count { slot[i] = 0 }
            offset = end
        }
    }
}
