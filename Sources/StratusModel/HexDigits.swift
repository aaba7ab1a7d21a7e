extension Sequence where Element == UInt8 {
    /// The bytes as lowercase hexadecimal digits, two per byte: how Stratus writes digests
    /// (an asset's `fileChecksum`, a stored token's hash). Inlinable, so that it is specialized for
    /// the caller's sequence: a token's hash is written on every request.
    @inlinable
    public var hexDigits: String {
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            text.append(hexDigit(byte >> 4))
            text.append(hexDigit(byte & 0x0F))
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// The lowercase hexadecimal digit of a value below 16, as an ASCII byte.
@inlinable @inline(__always)
func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
}
