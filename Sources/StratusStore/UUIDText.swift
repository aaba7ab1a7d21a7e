import Foundation
import GRDB

// A mirrored row's UUID is turned into text and back several times per row (its record's name, its
// key in the metadata tables, the forms its key may be stored in). Foundation formats with
// `snprintf` and parses with `sscanf` on Linux, which showed as a tenth of an import's time; these
// give the same text and accept the same text, with a table lookup per byte.

extension UUID {
    /// `uuidString`: 36 characters, upper-case hexadecimal digits and four dashes.
    var upperText: String { text(digits: UUID.upperDigits) }

    /// `uuidString.lowercased()`.
    var lowerText: String { text(digits: UUID.lowerDigits) }

    /// The UUID a database value holds in one of the forms a key may be stored in (16 bytes, or
    /// its text in either case), as `fromDatabaseValue` reads it, text parsed here.
    init?(databaseKey value: DatabaseValue) {
        if case .string(let text) = value.storage {
            self.init(text: text)
        } else if let uuid = UUID.fromDatabaseValue(value) {
            self = uuid
        } else {
            return nil
        }
    }

    /// The UUID written in `text` as `uuidString` writes one (either case); `nil` for anything else,
    /// as `init(uuidString:)`.
    init?(text: String) {
        var text = text
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = text.withUTF8 { utf8 in
            withUnsafeMutableBytes(of: &bytes) { bytes in
                guard utf8.count == 36 else { return false }
                var index = 0
                for byte in 0..<16 {
                    if UUID.isDash(before: byte) {
                        guard utf8[index] == UInt8(ascii: "-") else { return false }
                        index += 1
                    }
                    guard let high = UUID.nibble(utf8[index]), let low = UUID.nibble(utf8[index + 1]) else { return false }
                    bytes[byte] = high << 4 | low
                    index += 2
                }
                return true
            }
        }
        guard parsed else { return nil }
        self.init(uuid: bytes)
    }

    private static let upperDigits = Array("0123456789ABCDEF".utf8)
    private static let lowerDigits = Array("0123456789abcdef".utf8)
    /// Whether a dash precedes the byte in the text (8-4-4-4-12 digits).
    private static func isDash(before byte: Int) -> Bool {
        byte == 4 || byte == 6 || byte == 8 || byte == 10
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    private func text(digits: [UInt8]) -> String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { text in
                var index = 0
                for (offset, byte) in bytes.enumerated() {
                    if UUID.isDash(before: offset) {
                        text[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    text[index] = digits[Int(byte >> 4)]
                    text[index + 1] = digits[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}
