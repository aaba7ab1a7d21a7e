import Foundation

/// Appends JSON text to a byte buffer without an intermediate object tree.
///
/// Stratus writes every wire object through this type so that key order is stable (and matches
/// the order of Apple's documented examples) and so that stored, already-encoded JSON fragments
/// can be spliced into a response without being decoded first.
public struct JSONWriter: Sendable {
    /// The JSON text written so far, as UTF-8.
    public private(set) var bytes: [UInt8]
    private var needsComma = false

    /// Creates an empty writer, reserving `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Opens an object (`{`).
    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    /// Closes the current object (`}`).
    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// Opens an array (`[`).
    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    /// Closes the current array (`]`).
    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes an object key; the next value written belongs to it.
    public mutating func key(_ name: String) {
        separate()
        writeQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes an object key encoded once (``JSONKey``), for keys written in every record of a page.
    public mutating func key(_ key: JSONKey) {
        separate()
        bytes.append(contentsOf: key.encoded)
        needsComma = false
    }

    /// Writes a string value.
    public mutating func string(_ value: String) {
        separate()
        writeQuoted(value)
        needsComma = true
    }

    /// Writes an integer value.
    public mutating func int(_ value: Int64) {
        separate()
        appendDecimal(value)
        needsComma = true
    }

    /// Writes a floating-point value in its shortest round-tripping form.
    public mutating func double(_ value: Double) {
        separate()
        if value.isFinite, value == value.rounded(.towardZero), abs(value) < 1e15 {
            // Keep a fractional part so readers see a DOUBLE, not an INT64.
            appendDecimal(Int64(value))
            bytes.append(contentsOf: [UInt8(ascii: "."), UInt8(ascii: "0")])
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
        needsComma = true
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        append(value ? "true" : "false")
        needsComma = true
    }

    /// Writes `null`.
    public mutating func null() {
        separate()
        append("null")
        needsComma = true
    }

    /// Writes already-encoded JSON text as one value. The caller guarantees it is valid JSON.
    public mutating func raw(_ json: [UInt8]) {
        separate()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// Writes `key: value` for a non-nil string.
    public mutating func field(_ name: String, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// Writes `key: value` for a non-nil integer.
    public mutating func field(_ name: String, _ value: Int64?) {
        guard let value else { return }
        key(name)
        int(value)
    }

    /// Writes `key: value` for a non-nil Boolean.
    public mutating func field(_ name: String, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bool(value)
    }

    /// Writes `key: value` for a non-nil writable value.
    public mutating func field(_ name: String, _ value: (some JSONWritable)?) {
        guard let value else { return }
        key(name)
        value.write(to: &self)
    }

    /// Writes `key: [values]`.
    public mutating func field(_ name: String, array values: some Sequence<some JSONWritable>) {
        key(name)
        beginArray()
        for value in values { value.write(to: &self) }
        endArray()
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    /// Appends a literal's bytes in one copy.
    private mutating func append(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `value` in decimal: its digits are formed from the last, then appended in one copy.
    private mutating func appendDecimal(_ value: Int64) {
        // 19 digits and a sign hold every Int64.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var magnitude = value.magnitude
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                buffer[start] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[start...]))
        }
    }

    private mutating func writeQuoted(_ value: String) {
        var value = value
        // One pass over contiguous UTF-8: most strings need no escaping and are copied as they are.
        let copied = value.withUTF8 { utf8 in
            guard !Self.needsEscaping(UnsafeRawBufferPointer(utf8)) else { return false }
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: utf8)
            bytes.append(UInt8(ascii: "\""))
            return true
        }
        if copied { return }
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Whether `utf8` holds a byte JSON must escape: a control character, `"` or `\`. Eight bytes
    /// are tested at a time (a byte is below 0x20, or equal to a given byte, exactly when the
    /// borrow of a bytewise subtraction reaches its top bit).
    static func needsEscaping(_ utf8: UnsafeRawBufferPointer) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ word: UInt64) -> Bool { (word &- ones) & ~word & highBits != 0 }
        var offset = 0
        while offset + 8 <= utf8.count {
            let word = utf8.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            if (word &- ones &* 0x20) & ~word & highBits != 0 || hasZeroByte(word ^ (ones &* 0x22))
                || hasZeroByte(word ^ (ones &* 0x5C))
            {
                return true
            }
            offset += 8
        }
        for byte in utf8[offset...] where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            return true
        }
        return false
    }
}

/// An object key encoded once, quotes, escapes and colon included (`"recordName":`), so that
/// writing it is a copy of its bytes.
public struct JSONKey: Sendable {
    let encoded: [UInt8]

    /// The key `name`, encoded.
    public init(_ name: String) {
        var writer = JSONWriter(capacity: name.utf8.count + 3)
        writer.key(name)
        encoded = writer.bytes
    }
}

/// A value that writes itself as JSON.
public protocol JSONWritable {
    /// Appends this value's JSON form to `writer`.
    func write(to writer: inout JSONWriter)
}

extension JSONWritable {
    /// This value's JSON text as UTF-8 bytes.
    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        write(to: &writer)
        return writer.bytes
    }
}

extension String: JSONWritable {
    public func write(to writer: inout JSONWriter) { writer.string(self) }
}

extension Array: JSONWritable where Element: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginArray()
        for element in self { element.write(to: &writer) }
        writer.endArray()
    }
}
