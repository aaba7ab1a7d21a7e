extension Sequence where Element == UInt8 {
    /// The bytes as lowercase hexadecimal digits, two per byte: how Stratus writes digests
    /// (an asset's `fileChecksum`, a stored token's hash).
    public var hexDigits: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
