/// A parsed JSON document.
///
/// Stratus parses request bodies into this tree with its own byte-level parser and builds wire types
/// from it through ``JSONDecodable``, which costs a fraction of `JSONDecoder` with `Decodable`.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONMembers)

    /// Parses UTF-8 JSON text. Duplicate object keys keep the last value. With
    /// `refusingNullCharacter` (a request's text), a string holding U+0000 is refused.
    public static func parse(_ bytes: [UInt8], refusingNullCharacter: Bool = false) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = JSONReader(bytes: buffer, refusingNullCharacter: refusingNullCharacter)
            let value = try reader.readValue()
            try reader.expectEnd()
            return value
        }
    }
}

/// The members of a JSON object, in document order; a key written twice keeps its last value.
///
/// Objects on the wire have a handful of members, so they are kept as one list and looked up by
/// comparing keys, which costs less than hashing every key of every object; an object with many
/// members gets a hash index.
public struct JSONMembers: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    struct Member: Sendable {
        var key: String
        var value: JSONValue
    }

    private var members: [Member]
    /// Positions by key, once the object has more members than a scan should compare.
    private var positions: [String: Int]?
    static let scanLimit = 16

    /// An object without members.
    public init() {
        members = []
    }

    /// An object of `members`, whose keys are unique.
    init(unique members: [Member]) {
        self.members = members
        indexIfLarge()
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    /// How many members the object has.
    public var count: Int { members.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }

    /// The value of member `key`, as written (`.null` included); `nil` when absent. Setting a value
    /// replaces the member's, or adds one at the end.
    public subscript(key: String) -> JSONValue? {
        get { position(of: key).map { members[$0].value } }
        set {
            if let position = position(of: key) {
                if let newValue {
                    members[position].value = newValue
                } else {
                    members.remove(at: position)
                    positions = nil
                    indexIfLarge()
                }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
                if positions != nil { positions?[key] = members.count - 1 } else { indexIfLarge() }
            }
        }
    }

    private func position(of key: String) -> Int? {
        if let positions { return positions[key] }
        for position in members.indices where members[position].key == key { return position }
        return nil
    }

    private mutating func indexIfLarge() {
        guard positions == nil, members.count > Self.scanLimit else { return }
        positions = Dictionary(members.enumerated().map { ($1.key, $0) }, uniquingKeysWith: { $1 })
    }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: JSONValue)> {
        members.lazy.map { (key: $0.key, value: $0.value) }.makeIterator()
    }

    /// Objects are equal when they have the same members, in any order.
    public static func == (lhs: JSONMembers, rhs: JSONMembers) -> Bool {
        lhs.count == rhs.count && lhs.allSatisfy { rhs[$0.key] == $0.value }
    }
}

/// Why JSON text could not be parsed: text that is not JSON, or JSON holding a character Stratus
/// refuses (U+0000, in any string).
public struct JSONSyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of fault.
    public enum Kind: Hashable, Sendable {
        /// The text is not valid JSON.
        case malformed
        /// The text is valid JSON, but a string holds a character Stratus refuses in all text
        /// (U+0000, which PostgreSQL's text cannot hold, refused on every backend alike).
        case refusedCharacter
    }

    /// What is wrong.
    public var reason: String
    /// The byte offset where parsing stopped.
    public var offset: Int
    /// Whether the text is not JSON or holds a refused character.
    public var kind: Kind
    /// Where the fault is, from the root of the value read (the document's root for
    /// ``JSONValue/parse(_:)``): the members and elements holding it, such as
    /// `operations[3].record.fields.title.value`. Empty at the root, and for faults found by the
    /// streaming reads (``JSONReader/nextKey()``, ``JSONReader/skipValue()``, …), which keep no path.
    /// Built only when parsing fails, so parsing valid text costs nothing extra.
    public var path: [JSONDecodingError.PathComponent]

    /// Creates an error.
    public init(reason: String, offset: Int, kind: Kind = .malformed, path: [JSONDecodingError.PathComponent] = []) {
        self.reason = reason
        self.offset = offset
        self.kind = kind
        self.path = path
    }

    /// The same error further from the root: `components` come before its path.
    func prefixed(_ components: [JSONDecodingError.PathComponent]) -> JSONSyntaxError {
        var error = self
        error.path.insert(contentsOf: components, at: 0)
        return error
    }

    /// The same error one level further from the root.
    func prefixed(_ component: JSONDecodingError.PathComponent) -> JSONSyntaxError {
        var error = self
        error.path.insert(component, at: 0)
        return error
    }

    /// `operations[3].record.fields.title.value: <reason> (at byte N)`, or `<reason> at byte N` at the root.
    public var description: String {
        path.isEmpty
            ? "\(reason) at byte \(offset)"
            : "\(JSONDecodingError.text(of: path)): \(reason) (at byte \(offset))"
    }
}

/// A cursor over UTF-8 JSON text that reads it one value or one token at a time, checking its syntax
/// as it goes: ``JSONValue/parse(_:)`` builds its tree with it, and a decoder that needs no tree (a
/// change-feed page read straight into records) walks objects and arrays with it.
///
/// The bytes must stay valid while the reader is used (it is made inside `withUnsafeBufferPointer`).
public struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    /// Whether a string holding U+0000 is refused (``JSONSyntaxError/Kind/refusedCharacter``).
    let refusesNullCharacter: Bool
    static let maxDepth = 512

    /// A reader at the start of `bytes`. With `refusingNullCharacter`, as every request's text is
    /// read, a string holding U+0000 is refused: PostgreSQL's text cannot hold it, and SQLite would
    /// compare text only up to it. Stored and answered text is read without the check, so that text
    /// stored before the rule stays readable.
    public init(bytes: UnsafeBufferPointer<UInt8>, refusingNullCharacter: Bool = false) {
        self.bytes = bytes
        refusesNullCharacter = refusingNullCharacter
    }

    /// The byte offset of the next token.
    public var offset: Int { index }

    /// Reads the next value, whatever it is, as a tree.
    public mutating func readValue() throws -> JSONValue {
        skipWhitespace()
        return try parseValue()
    }

    /// Reads the next value as a tree when its text takes at most `maxBytes`; `nil`, with the
    /// reader where it was, when it takes more, found before more than `maxBytes` of it are parsed
    /// (a tree takes many times the bytes of its text, most for long lists of small values).
    public mutating func readValue(maxBytes: Int) throws -> JSONValue? {
        skipWhitespace()
        let start = index
        // One byte past the bound tells a value that ends at it from one cut there.
        let end = min(bytes.count, start + maxBytes + 1)
        var bounded = JSONReader(
            bytes: UnsafeBufferPointer(rebasing: bytes[start..<end]), refusingNullCharacter: refusesNullCharacter)
        bounded.depth = depth
        do {
            let value = try bounded.parseValue()
            guard bounded.index <= maxBytes else { return nil }
            index = start + bounded.index
            return value
        } catch let caught as JSONSyntaxError {
            // The offset in the whole text; the path, from the value's root, stays.
            var error = caught
            error.offset += start
            guard end < bytes.count else { throw error }
            // Cut at the bound, or wrong before it: reading past the whole value without a tree tells.
            var whole = self
            let length: Int
            do {
                length = try whole.skipValue().count
            } catch let fault as JSONSyntaxError where fault.offset == error.offset && fault.reason == error.reason {
                // The same fault, found before the bound: the tree's error names where it is.
                throw error
            }
            guard length <= maxBytes else { return nil }
            throw error
        }
    }

    /// Checks that nothing but whitespace follows.
    public mutating func expectEnd() throws {
        skipWhitespace()
        guard index == bytes.count else { throw error("unexpected text after the JSON value") }
    }

    /// The first byte of the next value (`{`, `[`, `"`, a digit or `-`, `t`, `f`, `n`), or `nil` at the end.
    public mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < bytes.count ? bytes[index] : nil
    }

    /// Reads `null` and returns `true`, or returns `false` and reads nothing when the next value is another.
    public mutating func readNull() throws -> Bool {
        guard peek() == UInt8(ascii: "n") else { return false }
        _ = try parseLiteral("null", .null)
        return true
    }

    /// Reads a string.
    public mutating func readString() throws -> String {
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a string") }
        return try parseString()
    }

    /// Reads `true` or `false`.
    public mutating func readBool() throws -> Bool {
        switch peek() {
        case UInt8(ascii: "t"): _ = try parseLiteral("true", .bool(true)); return true
        case UInt8(ascii: "f"): _ = try parseLiteral("false", .bool(false)); return false
        default: throw error("expected true or false")
        }
    }

    /// Reads a number: ``JSONValue/integer(_:)`` or ``JSONValue/double(_:)``.
    public mutating func readNumber() throws -> JSONValue {
        guard let first = peek(), first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw error("expected a number")
        }
        return try parseNumber()
    }

    /// Enters an object: then call ``nextKey()`` until it returns `nil`, reading each member's value
    /// after its key.
    public mutating func beginObject() throws {
        try enterContainer(opening: UInt8(ascii: "{"), closing: UInt8(ascii: "}"), "an object")
    }

    /// The key of the object's next member, its value to be read next; `nil` after the last member
    /// (the object is then read).
    public mutating func nextKey() throws -> String? {
        guard try advance(closing: UInt8(ascii: "}"), in: "an object") else { return nil }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
        let key = try parseString()
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
        index += 1
        return key
    }

    /// Enters an array: then call ``nextElement()`` until it returns `false`, reading each element
    /// after it returned `true`.
    public mutating func beginArray() throws {
        try enterContainer(opening: UInt8(ascii: "["), closing: UInt8(ascii: "]"), "an array")
    }

    /// Whether the array has another element, to be read next; `false` after the last one (the array
    /// is then read).
    public mutating func nextElement() throws -> Bool {
        try advance(closing: UInt8(ascii: "]"), in: "an array")
    }

    /// Whether the next ``nextKey()`` or ``nextElement()`` reads the first member or element, which
    /// no comma comes before.
    private var first = false

    /// Enters the object or array that `opening` starts.
    private mutating func enterContainer(opening: UInt8, closing: UInt8, _ what: String) throws {
        guard peek() == opening else { throw error("expected \(what)") }
        try enter()
        index += 1
        skipWhitespace()
        first = index < bytes.count && bytes[index] != closing
    }

    /// Moves to the next member or element of the container being read, past its comma; `false`
    /// (and the container left) at `closing`.
    private mutating func advance(closing: UInt8, in what: String) throws -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of input in \(what)") }
        if bytes[index] == closing {
            index += 1
            depth -= 1
            first = false
            return false
        }
        if first {
            first = false
        } else {
            guard bytes[index] == UInt8(ascii: ",") else {
                throw error("expected ',' or '\(String(decoding: [closing], as: UTF8.self))'")
            }
            index += 1
            skipWhitespace()
        }
        return true
    }

    /// Reads past the next value, checking its syntax, and returns the range of its bytes.
    @discardableResult
    public mutating func skipValue() throws -> Range<Int> {
        skipWhitespace()
        let start = index
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try beginObject()
            while try nextKey() != nil { try skipValue() }
        case UInt8(ascii: "["):
            try beginArray()
            while try nextElement() { try skipValue() }
        case UInt8(ascii: "\""):
            try skipString()
        default:
            _ = try parseValue()
        }
        return start..<index
    }

    /// Reads past a string without making it.
    private mutating func skipString() throws {
        let start = index
        index += 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"), 0x80...:
                // Escapes and non-ASCII text are checked by reading the string.
                index = start
                _ = try parseString()
                return
            case ..<0x20:
                throw error("control character in a string")
            default:
                index += 1
            }
        }
        throw error("unterminated string")
    }

    func error(_ reason: String) -> JSONSyntaxError { JSONSyntaxError(reason: reason, offset: index) }

    /// The reason of the error for a `\u0000` escape.
    static let refusedNullReason = "a string holds U+0000, which Stratus refuses in all text"

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default:
            throw error("unexpected character '\(String(decoding: [bytes[index]], as: UTF8.self))'")
        }
    }

    mutating func parseLiteral(_ text: StaticString, _ value: JSONValue) throws -> JSONValue {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count,
            (0..<count).allSatisfy({ bytes[index + $0] == text.utf8Start[$0] })
        else { throw error("invalid literal") }
        index += count
        return value
    }

    mutating func enter() throws {
        depth += 1
        guard depth <= Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth) levels") }
    }

    /// Members of the objects being parsed, innermost last; each object takes its own from the
    /// top when it ends, so that it is built in one allocation of the right size.
    var memberStack: [JSONMembers.Member] = []
    /// Elements of the arrays being parsed, likewise.
    var elementStack: [JSONValue] = []

    mutating func parseObject() throws -> JSONValue {
        try beginObject()
        let base = memberStack.count
        defer { memberStack.removeSubrange(base...) }
        /// Positions by key, once the object is too large to look for duplicates by scanning.
        var positions: [String: Int]?
        while let key = try nextKey() {
            skipWhitespace()
            let value: JSONValue
            do {
                value = try parseValue()
            } catch let error as JSONSyntaxError {
                // The path is built only on the way out of a failure: valid text costs nothing.
                throw error.prefixed(.key(key))
            }
            let duplicate: Int?
            if let known = positions {
                duplicate = known[key]
            } else {
                duplicate = (base..<memberStack.count).first { memberStack[$0].key == key }
            }
            if let duplicate {
                memberStack[duplicate].value = value
            } else {
                memberStack.append(JSONMembers.Member(key: key, value: value))
                if positions != nil {
                    positions?[key] = memberStack.count - 1
                } else if memberStack.count - base > JSONMembers.scanLimit {
                    positions = Dictionary(
                        (base..<memberStack.count).map { (memberStack[$0].key, $0) }, uniquingKeysWith: { $1 })
                }
            }
        }
        return .object(JSONMembers(unique: Array(memberStack[base...])))
    }

    mutating func parseArray() throws -> JSONValue {
        try beginArray()
        let base = elementStack.count
        defer { elementStack.removeSubrange(base...) }
        while try nextElement() {
            let element: JSONValue
            do {
                element = try parseValue()
            } catch let error as JSONSyntaxError {
                throw error.prefixed(.index(elementStack.count - base))
            }
            elementStack.append(element)
        }
        return .array(Array(elementStack[base...]))
    }

    mutating func parseString() throws -> String {
        index += 1
        let start = index
        // The bits of every byte: below 0x80, the string is ASCII and needs no validation.
        var seen: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return seen < 0x80 ? String(decoding: slice, as: UTF8.self) : try validated(slice)
            }
            if byte == UInt8(ascii: "\\") {
                index = start
                return try parseEscapedString()
            }
            if byte < 0x20 { throw error("control character in a string") }
            seen |= byte
            index += 1
        }
        throw error("unterminated string")
    }

    /// The string of UTF-8 `text`, or an error when it is not valid UTF-8.
    func validated(_ text: UnsafeBufferPointer<UInt8>) throws -> String {
        // Decoding repairs invalid sequences, so a repaired string differs from its bytes.
        let string = String(decoding: text, as: UTF8.self)
        guard string.utf8.elementsEqual(text) else { throw error("invalid UTF-8") }
        return string
    }

    mutating func parseEscapedString() throws -> String {
        var scalars: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return try scalars.withUnsafeBufferPointer(validated)
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if code == 0, refusesNullCharacter {
                        // PostgreSQL's text cannot hold U+0000, so no backend takes it, in any text
                        // of any request. (Unescaped, it is a control character, refused above.)
                        throw JSONSyntaxError(
                            reason: Self.refusedNullReason, offset: index - 6, kind: .refusedCharacter)
                    }
                    if (0xD800..<0xDC00).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                    scalars.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    throw error("invalid escape")
                }
            default:
                if byte < 0x20 { throw error("control character in a string") }
                scalars.append(byte)
            }
        }
        throw error("unterminated string")
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let digitsStart = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        guard index > digitsStart else { throw error("expected digits") }
        guard !(bytes[digitsStart] == UInt8(ascii: "0") && index - digitsStart > 1) else {
            throw error("leading zeros are not allowed")
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let fractionStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > fractionStart else { throw error("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let exponentStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > exponentStart else { throw error("expected exponent digits") }
        }
        if isInteger, index - digitsStart <= 18 {
            // Up to 18 digits cannot overflow: add them up without making a string.
            var value: Int64 = 0
            for position in digitsStart..<index { value = value &* 10 &+ Int64(bytes[position] &- UInt8(ascii: "0")) }
            return .integer(digitsStart > start ? -value : value)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw error("number out of range") }
        return .double(double)
    }
}
