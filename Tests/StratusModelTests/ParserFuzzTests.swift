import Foundation
import StratusModel
import Testing

/// Property-based fuzzing of the three parsers that read what clients send: the JSON parser, the
/// schema language and query filters. Inputs come from a seeded generator (the seed of a failure is
/// in its message, so it replays), built from valid documents and then mutated byte by byte. Every
/// input must parse or be refused with the parser's own error, never crash or hang, and what parses
/// must survive a round trip through its writer.
///
/// `scripts/test` runs 2,000 cases per parser; `scripts/campaign fuzz` sets
/// `STRATUS_CAMPAIGN_FUZZ_CASES`.
@Suite("fuzzing: JSON, schema language and query filters")
struct ParserFuzzTests {
    static var cases: Int { ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_FUZZ_CASES"].flatMap(Int.init) ?? 2000 }
    static var firstSeed: UInt64 {
        ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_FUZZ_SEED"].flatMap(UInt64.init) ?? 20_261_124
    }

    @Test("JSON: written values parse back equal; mutated text parses or is refused, and what parses round-trips")
    func json() throws {
        for seed in Self.firstSeed..<Self.firstSeed + UInt64(Self.cases) {
            var random = SplitMix(seed: seed)
            let value = random.jsonValue(depth: 4)
            let text = Self.write(value)
            #expect(try JSONValue.parse(text) == value, "seed \(seed): \(String(decoding: text, as: UTF8.self))")
            let mutated = random.mutate(text, vocabulary: Array(#"{}[]",:"\-+.eE0123456789tfnul \#u{0}"#.utf8) + [0xFF, 0xC3])
            do {
                let parsed = try JSONValue.parse(mutated)
                #expect(try JSONValue.parse(Self.write(parsed)) == parsed, "seed \(seed)")
            } catch is JSONSyntaxError {
                // Refused with the offset and reason, as it should be.
            }
        }
        // Nesting past the parser's depth limit is refused, not a stack overflow.
        let deep = Array(repeating: UInt8(ascii: "["), count: 200_000)
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(deep) }
    }

    @Test("schema language: random schemas print and parse back equal; mutated text parses or is refused")
    func schemaLanguage() throws {
        for seed in Self.firstSeed..<Self.firstSeed + UInt64(Self.cases) {
            var random = SplitMix(seed: seed)
            let text = random.schemaText()
            let schema: Schema
            do {
                schema = try Schema(parsing: text)
            } catch {
                Issue.record("seed \(seed): a generated schema is refused: \(error)\n\(text)")
                continue
            }
            #expect(try Schema(parsing: schema.text) == schema, "seed \(seed):\n\(schema.text)")
            let mutated = String(
                decoding: random.mutate(Array(text.utf8), vocabulary: Array("();,<>\"'-/ \nQUERYABLE LIST".utf8)),
                as: UTF8.self)
            do {
                let parsed = try Schema(parsing: mutated)
                #expect(try Schema(parsing: parsed.text) == parsed, "seed \(seed):\n\(mutated)")
            } catch {
                #expect(error.line >= 1 && error.column >= 1 && !error.reason.isEmpty, "seed \(seed)")
            }
        }
    }

    @Test("query filters: any JSON decodes or is refused with a decoding error; decoded filters evaluate on any record")
    func queryFilters() throws {
        for seed in Self.firstSeed..<Self.firstSeed + UInt64(Self.cases) {
            var random = SplitMix(seed: seed)
            let query = random.queryJSON()
            let text = Self.write(query)
            let mutated = random.chance(2) ? random.mutate(text, vocabulary: Array(#"{}[]",:"0123456789-.eE"#.utf8)) : text
            guard let json = try? JSONValue.parse(mutated) else { continue }
            let decoded: Query
            do {
                decoded = try Query(json: json)
            } catch is JSONDecodingError {
                continue
            } catch let error as StratusError {
                #expect(error.code == .badRequest, "seed \(seed): \(error)")
                continue
            }
            let record = random.fields()
            for filter in decoded.filterBy {
                for type in FieldType.allCases { _ = filter.violation(forFieldType: type) }
                _ = filter.matches(record)
            }
            for sort in decoded.sortBy { _ = sort.sortKey(record) }
        }
    }

    /// JSON text for a value.
    static func write(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        write(value, to: &writer)
        return writer.bytes
    }

    static func write(_ value: JSONValue, to writer: inout JSONWriter) {
        switch value {
        case .null: writer.null()
        case .bool(let bool): writer.bool(bool)
        case .integer(let integer): writer.int(integer)
        case .double(let double): writer.double(double)
        case .string(let string): writer.string(string)
        case .array(let elements):
            writer.beginArray()
            for element in elements { write(element, to: &writer) }
            writer.endArray()
        case .object(let members):
            writer.beginObject()
            for (key, member) in members {
                writer.key(key)
                write(member, to: &writer)
            }
            writer.endObject()
        }
    }
}

/// SplitMix64: a small, fast, seedable generator, so every case replays from its seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True one time in `n`.
    mutating func chance(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &self) == 0 }

    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &self)] }

    /// A string of ASCII, escapes, non-ASCII and astral characters.
    mutating func string() -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "ß", "😀", "\u{7F}", "名", "\u{FEFF}"]
        return (0..<Int.random(in: 0...8, using: &self)).map { _ in pick(pieces) }.joined()
    }

    mutating func jsonValue(depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 0 ? 8 : 6), using: &self) {
        case 0: return .null
        case 1: return .bool(chance(2))
        case 2: return .integer(pick([0, 1, -1, Int64.max, Int64.min, Int64.random(in: -1_000_000...1_000_000, using: &self)]))
        case 3:
            let double = pick([0.5, -2.25, 1e300, -1e-300, 3.141592653589793, Double.random(in: -1e6...1e6, using: &self)])
            return .double(double)
        case 4, 5: return .string(string())
        case 6: return .array((0..<Int.random(in: 0...4, using: &self)).map { _ in jsonValue(depth: depth - 1) })
        default:
            var members = JSONMembers()
            for _ in 0..<Int.random(in: 0...4, using: &self) { members[string()] = jsonValue(depth: depth - 1) }
            return .object(members)
        }
    }

    /// `bytes` with up to eight random edits: a byte replaced, inserted or removed, or a span cut.
    mutating func mutate(_ bytes: [UInt8], vocabulary: [UInt8]) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...8, using: &self) {
            let index = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &self)
            switch Int.random(in: 0..<4, using: &self) {
            case 0 where !bytes.isEmpty: bytes[index] = pick(vocabulary)
            case 1: bytes.insert(pick(vocabulary), at: index)
            case 2 where !bytes.isEmpty: bytes.remove(at: index)
            default:
                if !bytes.isEmpty {
                    bytes.removeSubrange(index..<min(bytes.count, index + Int.random(in: 1...16, using: &self)))
                }
            }
        }
        return bytes
    }

    /// Schema-language text for a random valid schema: roles, record types, every field type and
    /// option, grants, comments and quoted names, in random case.
    mutating func schemaText() -> String {
        let types: [(text: String, type: FieldType)] = [
            ("STRING", .string), ("INT64", .int64), ("DOUBLE", .double), ("TIMESTAMP", .timestamp), ("BYTES", .bytes),
            ("ASSET", .asset), ("REFERENCE", .reference), ("LOCATION", .location), ("NUMBER", .double),
            ("NUMBER PREFERRED AS INT64", .int64), ("NUMBER PREFERRED AS DOUBLE", .double), ("LIST<STRING>", .stringList),
            ("LIST<INT64>", .int64List), ("List < Location >", .locationList), ("LIST<BYTES>", .bytesList),
        ]
        func cased(_ keyword: String, _ random: inout SplitMix) -> String {
            random.chance(3) ? keyword.lowercased() : keyword
        }
        var lines = [chance(3) ? "// generated" : "", "\(cased("DEFINE", &self)) SCHEMA"]
        let roles = (0..<Int.random(in: 0...2, using: &self)).map { "Role\($0)" }
        for role in roles { lines.append("  \(cased("CREATE ROLE", &self)) \(chance(2) ? "\"\(role)\"" : role);") }
        for typeIndex in 0..<Int.random(in: 0...3, using: &self) {
            var entries: [String] = []
            for fieldIndex in 0..<Int.random(in: 0...5, using: &self) {
                let (text, type) = pick(types)
                let supported = FieldIndexes.automatic(for: type)
                let options = [("QUERYABLE", FieldIndexes.queryable), ("SORTABLE", .sortable), ("SEARCHABLE", .searchable)]
                    .filter { supported.contains($0.1) && chance(3) }.map { cased($0.0, &self) }
                let name = chance(4) ? "\"field \(fieldIndex)\"" : "f\(fieldIndex)"
                entries.append("    \(name) \(text) \(options.joined(separator: " "))")
            }
            if chance(2) {
                let role = pick(["_creator", "_icloud", "_world"] + roles)
                entries.append("    GRANT \(pick(["READ", "WRITE", "CREATE", "READ, WRITE"])) TO \"\(role)\"")
            }
            lines.append("  \(cased("RECORD TYPE", &self)) T\(typeIndex) (\n\(entries.joined(separator: ",\n"))\n  );")
        }
        return lines.joined(separator: "\n")
    }

    /// A `query` object: a record type, filters of every comparator with values of every type
    /// (fitting or not), sorts with and without locations.
    mutating func queryJSON() -> JSONValue {
        let types = FieldType.allCases.map(\.rawValue) + ["NOPE", ""]
        var filters: [JSONValue] = []
        for _ in 0..<Int.random(in: 0...4, using: &self) {
            var fieldValue: JSONMembers = ["value": fieldValueJSON()]
            if !chance(4) { fieldValue["type"] = .string(pick(types)) }
            var filter: JSONMembers = [
                "comparator": .string(pick(QueryComparator.allCases.map(\.rawValue) + ["LIKE"])),
                "fieldName": .string(pick(["title", "count", "___all", "___createTime", "place", "tags", ""])),
                "fieldValue": .object(fieldValue),
            ]
            if chance(3) { filter["distance"] = .double(Double.random(in: -10...1e6, using: &self)) }
            filters.append(.object(filter))
        }
        var sorts: [JSONValue] = []
        for _ in 0..<Int.random(in: 0...2, using: &self) {
            var sort: JSONMembers = ["fieldName": .string(pick(["title", "count", "place"])), "ascending": .bool(chance(2))]
            if chance(3) { sort["relativeLocation"] = .object(["latitude": .double(52.5), "longitude": .double(13.4)]) }
            sorts.append(.object(sort))
        }
        return .object(["recordType": .string("Note"), "filterBy": .array(filters), "sortBy": .array(sorts)])
    }

    /// A `value` of any shape a field value may take on the wire, and some it may not.
    mutating func fieldValueJSON() -> JSONValue {
        switch Int.random(in: 0..<7, using: &self) {
        case 0: return .string(string())
        case 1: return .integer(Int64.random(in: -100...100, using: &self))
        case 2: return .double(Double.random(in: -100...100, using: &self))
        case 3: return .object(["latitude": .double(52.5), "longitude": .double(13.4)])
        case 4: return .object(["recordName": .string(string())])
        case 5: return .array((0..<Int.random(in: 0...3, using: &self)).map { _ in fieldValueJSON() })
        default: return jsonValue(depth: 2)
        }
    }

    /// A record's fields, of several types, under the names the filters use.
    mutating func fields() -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        if chance(2) { fields["title"] = .string(string()) }
        if chance(2) { fields["count"] = chance(2) ? .int64(Int64.random(in: -100...100, using: &self)) : .string("7") }
        if chance(2) { fields["place"] = .location(Location(latitude: 52.5, longitude: 13.4)) }
        if chance(2) { fields["tags"] = .list(elementType: .string, [.string(string()), .string(string())]) }
        return fields
    }
}
