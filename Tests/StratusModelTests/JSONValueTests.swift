import Foundation
import StratusModel
import Testing

@Suite("JSON parser")
struct JSONValueTests {
    func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

    @Test("values, escapes and numbers")
    func values() throws {
        #expect(try parse(#" {"a": [1, -2, 3.5, 1e3, true, false, null, "x"]} "#) == .object([
            "a": .array([.integer(1), .integer(-2), .double(3.5), .double(1000), .bool(true), .bool(false), .null,
                         .string("x")]),
        ]))
        #expect(try parse(#""q\"b\\s\/n\nt\tu\u00e9\ud83d\ude00""#) == .string("q\"b\\s/n\nt\tué😀"))
        #expect(try parse("9223372036854775807") == .integer(Int64.max))
        #expect(try parse("9223372036854775808") == .double(9_223_372_036_854_775_808), "beyond Int64 becomes a double")
        #expect(try parse("1.0") == .double(1), "a fraction marks a double")
        #expect(try parse(#"{"k": 1, "k": 2}"#) == .object(["k": .integer(2)]), "the last duplicate key wins")
        #expect(try parse("\"caf\u{e9}\"") == .string("café"))
    }

    @Test("malformed text is refused with the offset", arguments: [
        "", "{", "[1,]", #"{"a" 1}"#, #"{"a": 1,}"#, "01", "1.", "-", "1e", "tru", "nul", #""\x""#, #""\ud800""#,
        "\"a\u{1}b\"", #""unterminated"#, "[1] 2", "{1: 2}", "+1", "NaN",
    ])
    func malformed(_ text: String) {
        #expect(throws: JSONSyntaxError.self) { try parse(text) }
    }

    @Test("invalid UTF-8 and deep nesting are refused")
    func limits() {
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) }
        #expect(throws: JSONSyntaxError.self) { try parse(String(repeating: "[", count: 600) + String(repeating: "]", count: 600)) }
        #expect(throws: Never.self) { try parse(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)) }
    }

    @Test("decoding errors name the path and the rule")
    func decodingErrors() throws {
        func message(_ json: String) -> String {
            do {
                _ = try ModifyRecordsRequest(jsonBytes: Array(json.utf8))
                return "decoded"
            } catch {
                return "\(error)"
            }
        }
        #expect(message("[]") == "the request body must be an object")
        #expect(message("{}") == "operations is required")
        #expect(message(#"{"operations": {}}"#) == "operations must be an array")
        #expect(message(#"{"operations": [{"record": {}}]}"#) == "operations[0].operationType is required")
        #expect(message(#"{"operations": [{"operationType": "create", "record": {"fields": {"n": {"value": "x", "type": "INT64"}}}}]}"#)
            == "operations[0].record.fields.n.value: must be a whole number (or a string of one) for type INT64")
        #expect(message(#"{"operations": [{"operationType": "create", "record": {"fields": {"l": {"value": [1, "a"], "type": "INT64_LIST"}}}}]}"#)
            == "operations[0].record.fields.l.value[1]: must be a whole number (or a string of one) for type INT64")
        #expect(message(#"{"operations": [], "zoneID": {"zoneName": 5}}"#) == "zoneID.zoneName must be a string")
    }
}
