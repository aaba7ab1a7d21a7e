import Foundation

extension QueryFilter {
    /// Whether a record with these fields satisfies the filter.
    ///
    /// A record lacking the field satisfies only the negative comparators (`NOT_EQUALS`, `NOT_IN`,
    /// `NOT_LIST_CONTAINS`, `NOT_LIST_CONTAINS_ANY`, `NOT_LIST_CONTAINS_ALL`, `NOT_BEGINS_WITH`,
    /// `NOT_LIST_MEMBER_BEGINS_WITH`). A record whose field has a type the filter does not apply to
    /// (``violation(forFieldType:)`` is not `nil`) satisfies none, negative or not.
    ///
    /// Values compare as their ``QueryScalar``s, the way an SQLite index orders them. Strings are
    /// therefore case-sensitive and compared by UTF-8 bytes. This is deliberate: native CloudKit
    /// folds case in `EQUALS` and `LESS_THAN`, but byte comparison keeps filters consistent with sorting
    /// and with what every store's index can answer. Only the token comparators fold case and
    /// diacritics (``TextTokenizer``). `NEAR` includes records exactly `distance` meters away.
    public func matches(_ fields: [String: FieldValue]) -> Bool {
        if fieldName == Self.allSearchableFields {
            return comparator.isTokenSearch && containsTokens(in: fields.values.flatMap(\.strings))
        }
        guard let value = fields[fieldName] else { return comparator.isNegative }
        guard violation(forFieldType: value.type) == nil else { return false }
        switch comparator {
        case .equals, .in, .listContains, .listContainsAny:
            return holdsAny(of: value)
        case .notEquals, .notIn, .notListContains, .notListContainsAny:
            return !holdsAny(of: value)
        case .listContainsAll:
            return holdsAll(of: value)
        case .notListContainsAll:
            return !holdsAll(of: value)
        case .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals:
            guard let field = value.queryScalars.first, let given = fieldValue.queryScalars.first else { return false }
            return switch comparator {
            case .lessThan: field < given
            case .lessThanOrEquals: field <= given
            case .greaterThan: field > given
            default: field >= given
            }
        case .beginsWith, .listMemberBeginsWith:
            return beginsWith(value)
        case .notBeginsWith, .notListMemberBeginsWith:
            return !beginsWith(value)
        case .containsAllTokens, .containsAnyTokens:
            return containsTokens(in: value.strings)
        case .near:
            guard case .location(let location) = value, case .location(let center) = fieldValue, let distance else {
                return false
            }
            return location.distance(to: center) <= distance
        }
    }

    /// Whether `value` (a scalar, or a list's elements) holds at least one of the filter's scalars.
    /// A set of the record's scalars: a record's list may hold hundreds of thousands of them.
    private func holdsAny(of value: FieldValue) -> Bool {
        let held = Set(value.queryScalars)
        return fieldValue.queryScalars.contains { held.contains($0) }
    }

    /// Whether the list `value` holds every one of the filter's scalars.
    private func holdsAll(of value: FieldValue) -> Bool {
        let held = Set(value.queryScalars)
        return fieldValue.queryScalars.allSatisfy { held.contains($0) }
    }

    /// Whether a string of `value` starts with the filter's value, byte for byte.
    private func beginsWith(_ value: FieldValue) -> Bool {
        guard case .string(let prefix) = fieldValue else { return false }
        return value.strings.contains { $0.utf8.starts(with: prefix.utf8) }
    }

    /// Whether `texts` hold all (or any, for `CONTAINS_ANY_TOKENS`) of the filter value's tokens.
    /// A value without tokens matches nothing.
    private func containsTokens(in texts: [String]) -> Bool {
        guard case .string(let text) = fieldValue else { return false }
        let wanted = TextTokenizer.tokens(text)
        guard !wanted.isEmpty else { return false }
        let present = Set(texts.flatMap(TextTokenizer.tokens))
        return comparator == .containsAllTokens
            ? wanted.allSatisfy(present.contains)
            : wanted.contains(where: present.contains)
    }
}

extension FieldValue {
    /// The scalar(s) a value is indexed and sorted by: string → text, int64/timestamp → integer,
    /// double → real, reference → text(recordName), lists → one per element; bytes, assets and
    /// locations → none.
    public var queryScalars: [QueryScalar] {
        switch self {
        case .string(let text): [.text(text)]
        case .int64(let integer), .timestamp(let integer): [.integer(integer)]
        case .double(let real): [.real(real)]
        case .reference(let reference): [.text(reference.recordName)]
        case .bytes, .asset, .location: []
        case .list(_, let values): values.flatMap(\.queryScalars)
        }
    }

}

extension QuerySort {
    /// The key a record sorts by under this descriptor: the field's scalar (`nil` when absent, or
    /// when the field is a list), or for ``relativeLocation`` the distance in meters as `.real`
    /// (`nil` when the field is not a `LOCATION`).
    public func sortKey(_ fields: [String: FieldValue]) -> QueryScalar? {
        guard let value = fields[fieldName] else { return nil }
        if let relativeLocation {
            guard case .location(let location) = value else { return nil }
            return .real(location.distance(to: relativeLocation))
        }
        if case .list = value { return nil }
        return value.queryScalars.first
    }
}

/// A sortable, indexable scalar: what storage puts in its index and what sorting compares.
///
/// The order equals SQLite's order of the same values: integers and reals compare numerically with
/// each other, exactly (`integer(9007199254740993) > real(9007199254740992)`, and
/// `integer(3) == real(3)`); every number sorts before every text; texts compare by their UTF-8
/// bytes, and are equal only when their bytes are (unlike `String`'s `==`, which equates canonically
/// equivalent strings such as precomposed and decomposed "é"). A NaN real, which SQLite stores as
/// NULL, sorts before every other value.
public enum QueryScalar: Hashable, Sendable, Comparable {
    /// An `INT64` or `TIMESTAMP` value.
    case integer(Int64)
    /// A `DOUBLE` value.
    case real(Double)
    /// A `STRING` value, or a reference's record name.
    case text(String)

    /// Whether the two values are equal under SQLite's rules (see ``QueryScalar``).
    public static func == (lhs: QueryScalar, rhs: QueryScalar) -> Bool { lhs.order(rhs) == 0 }

    /// Whether `lhs` sorts before `rhs` under SQLite's rules (see ``QueryScalar``).
    public static func < (lhs: QueryScalar, rhs: QueryScalar) -> Bool { lhs.order(rhs) < 0 }

    /// Hashes consistently with ``==(_:_:)``: a real equal to an integer hashes as that integer, and
    /// a text hashes its UTF-8 bytes.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .integer(let integer):
            hasher.combine(0 as UInt8)
            hasher.combine(integer)
        case .real(let real):
            hasher.combine(0 as UInt8)
            if let integer = Int64(exactly: real) {
                hasher.combine(integer)
            } else {
                hasher.combine(real.isNaN ? .nan : real)
            }
        case .text(var text):
            hasher.combine(1 as UInt8)
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// -1, 0 or 1 as `self` sorts before, with or after `other`.
    private func order(_ other: QueryScalar) -> Int {
        switch (self, other) {
        case (.integer(let lhs), .integer(let rhs)): lhs < rhs ? -1 : lhs == rhs ? 0 : 1
        case (.real(let lhs), .real(let rhs)): Self.order(lhs, rhs)
        case (.integer(let lhs), .real(let rhs)): Self.order(lhs, rhs)
        case (.real(let lhs), .integer(let rhs)): -Self.order(rhs, lhs)
        case (.text(let lhs), .text(let rhs)): Self.order(lhs, rhs)
        case (.text, _): 1
        case (_, .text): -1
        }
    }

    /// Orders two reals, NaN first.
    private static func order(_ lhs: Double, _ rhs: Double) -> Int {
        if lhs < rhs { return -1 }
        if lhs > rhs { return 1 }
        if lhs == rhs { return 0 }
        return lhs.isNaN == rhs.isNaN ? 0 : lhs.isNaN ? -1 : 1
    }

    /// Orders an integer and a real exactly, without rounding the integer to a `Double`.
    private static func order(_ integer: Int64, _ real: Double) -> Int {
        if real.isNaN || real < -0x1p63 { return 1 }
        if real >= 0x1p63 { return -1 }
        let whole = real.rounded(.down)
        let wholeInteger = Int64(whole)
        if integer != wholeInteger { return integer < wholeInteger ? -1 : 1 }
        return whole < real ? -1 : 0
    }

    /// Orders two texts by their UTF-8 bytes, as `memcmp` does.
    private static func order(_ lhs: String, _ rhs: String) -> Int {
        var lhsBytes = lhs.utf8.makeIterator()
        var rhsBytes = rhs.utf8.makeIterator()
        while true {
            switch (lhsBytes.next(), rhsBytes.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let lhsByte?, let rhsByte?) where lhsByte != rhsByte: return lhsByte < rhsByte ? -1 : 1
            default: continue
            }
        }
    }
}

extension Location {
    /// Earth's mean radius in meters (IUGG).
    private static let earthRadius = 6_371_008.8

    /// Great-circle distance in meters (haversine, Earth radius 6,371,008.8 m).
    public func distance(to other: Location) -> Double {
        let latitude1 = latitude * .pi / 180
        let latitude2 = other.latitude * .pi / 180
        let halfLatitudeDelta = sin((latitude2 - latitude1) / 2)
        let halfLongitudeDelta = sin((other.longitude - longitude) * .pi / 360)
        let haversine = halfLatitudeDelta * halfLatitudeDelta
            + cos(latitude1) * cos(latitude2) * halfLongitudeDelta * halfLongitudeDelta
        return 2 * Self.earthRadius * asin(min(1, haversine.squareRoot()))
    }
}

/// Splits text into the tokens that `CONTAINS_ALL_TOKENS` and `CONTAINS_ANY_TOKENS` match.
public enum TextTokenizer {
    /// The search tokens of a text: case- and diacritic-folded
    /// (`folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)`), split on every
    /// character that is not a letter or number (`Character.isLetter`, `isNumber`), empty pieces
    /// dropped, duplicates removed, in first-occurrence order. Tokens are in Unicode normalization
    /// form C, so equal tokens have equal bytes: "Crème Brûlée!" gives `["creme", "brulee"]`.
    public static func tokens(_ text: String) -> [String] {
        var seen: Set<String> = []
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            // ASCII, the common case, gives the same tokens without Foundation's folding, which
            // costs more than the rest of indexing a record.
            var tokens: [String] = []
            var token: [UInt8] = []
            func finish() {
                if !token.isEmpty, case let word = String(decoding: token, as: UTF8.self), seen.insert(word).inserted {
                    tokens.append(word)
                }
                token.removeAll(keepingCapacity: true)
            }
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): token.append(byte)
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): token.append(byte + 32)
                default: finish()
                }
            }
            finish()
            return tokens
        }
        let folded = text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
            .precomposedStringWithCanonicalMapping
        return folded.split { !$0.isLetter && !$0.isNumber }.map(String.init).filter { seen.insert($0).inserted }
    }
}
