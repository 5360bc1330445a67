/// Turns "00 01 0a" (whitespace and newlines ignored) into bytes.
func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { $0.isHexDigit }
    precondition(digits.count % 2 == 0)
    var out: [UInt8] = []
    var i = digits.startIndex
    while i < digits.endIndex {
        let j = digits.index(i, offsetBy: 2)
        out.append(UInt8(digits[i..<j], radix: 16)!)
        i = j
    }
    return out
}
