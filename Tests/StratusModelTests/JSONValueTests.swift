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

    /// The error `body` throws when it is a ``JSONSyntaxError``; `nil` when it throws another or none.
    func syntaxError(_ body: () throws -> Any) -> JSONSyntaxError? {
        do {
            _ = try body()
            return nil
        } catch let error as JSONSyntaxError {
            return error
        } catch {
            return nil
        }
    }

    static let nulReason = "a string holds U+0000, which Stratus refuses in all text"

    @Test("U+0000 is refused in every string, keys and values, naming where it is")
    func nullCharacter() throws {
        // Read as a request's text is; stored and answered text is read without the check.
        func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8), refusingNullCharacter: true) }
        #expect(try self.parse(#"{"a": "x\u0000y"}"#) == .object(["a": .string("x\u{0}y")]))
        let reason = Self.nulReason
        let inValue = try #require(syntaxError { try parse(#"{"a": {"b": "x\u0000y"}}"#) })
        #expect(inValue.kind == .refusedCharacter)
        #expect(inValue.reason == reason)
        #expect(inValue.path == [.key("a"), .key("b")])
        #expect(inValue.offset == 14, "the offset of the escape")
        #expect(inValue.description == "a.b: \(reason) (at byte 14)")

        let inKey = try #require(syntaxError { try parse(#"{"a": {"k\u0000": 1}}"#) })
        #expect(inKey.kind == .refusedCharacter && inKey.reason == reason)
        #expect(inKey.path == [.key("a")], "a key's fault is in the object holding it")
        #expect(inKey.description == "a: \(reason) (at byte 9)")
        let atRoot = try #require(syntaxError { try parse(#"{"k\u0000": 1}"#) })
        #expect(atRoot.path.isEmpty && atRoot.description == "\(reason) at byte 3")

        let inElement = try #require(syntaxError { try parse(#"{"list": [1, ["a", "\u0000"]]}"#) })
        #expect(inElement.kind == .refusedCharacter)
        #expect(inElement.path == [.key("list"), .index(1), .index(1)])
        #expect(inElement.description == "list[1][1]: \(reason) (at byte 20)")

        // An escaped backslash before `u0000` is text, not an escape; other control characters escaped are kept.
        #expect(try parse(#"{"a\\u0000": ["\\u0000", "\u0001"]}"#)
            == .object([#"a\u0000"#: .array([.string(#"\u0000"#), .string("\u{1}")])]))
        // A raw NUL byte is a control character: not JSON at all.
        let raw = try #require(syntaxError { try JSONValue.parse(Array(#"{"a": ["x"#.utf8) + [0] + Array(#""]}"#.utf8)) })
        #expect(raw.kind == .malformed && raw.reason == "control character in a string")
        #expect(raw.path == [.key("a"), .index(0)])
    }

    @Test("U+0000 in a records/modify body names its path from the document's root")
    func nullCharacterInRequest() throws {
        func refusals(_ body: String, limits: Limits = Limits()) -> [String] {
            let bytes = Array(body.utf8)
            // Read as one tree, and one operation at a time.
            return [
                syntaxError { try ModifyRecordsRequest(jsonBytes: bytes, refusingNullCharacter: true) },
                syntaxError { try ModifyRecordsRequest(jsonBytes: bytes, limits: limits) },
            ].map { error in
                guard let error else { return "no JSONSyntaxError" }
                return error.kind == .refusedCharacter ? error.description : "not a refusal: \(error)"
            }
        }
        func offset(of text: String, in body: String) -> Int {
            body.utf8.distance(from: body.startIndex, to: body.range(of: text)!.lowerBound)
        }
        let reason = Self.nulReason
        let body = #"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "#
            + #""fields": {"title": {"value": "a\u0000b"}}}}]}"#
        let expected = "operations[0].record.fields.title.value: \(reason) (at byte \(offset(of: #"\u0000"#, in: body)))"
        #expect(refusals(body) == [expected, expected])

        // An operation whose bound ends before the text does is read past it to tell a fault from a cut:
        // the fault keeps its path.
        let limits = Limits(maxOperationsPerRequest: 3, maxRecordSizeBytes: 1_000)
        let padding = Array(repeating: "0", count: limits.maxOperationTextBytes / 2 + 1_000).joined(separator: ",")
        let long = #"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "#
            + #""fields": {"l": {"value": ["ok", "\u0000"]}}}}, {"operationType": "create", "record": "#
            + #"{"recordName": "b", "recordType": "T", "fields": {"n": {"value": ["# + padding + "]}}}}]}"
        #expect(long.utf8.count > limits.maxOperationTextBytes + 100)
        let longExpected = "operations[0].record.fields.l.value[1]: \(reason) (at byte \(offset(of: #"\u0000"#, in: long)))"
        #expect(refusals(long, limits: limits) == [longExpected, longExpected])

        let inMember = #"{"zoneID": {"zoneName": "Z\u0000"}, "operations": []}"#
        let memberExpected = "zoneID.zoneName: \(reason) (at byte \(offset(of: #"\u0000"#, in: inMember)))"
        #expect(refusals(inMember) == [memberExpected, memberExpected])
    }

    @Test("a bounded read parses a value only while its text fits")
    func boundedRead() throws {
        func read(_ text: String, maxBytes: Int) throws -> (JSONValue?, offset: Int) {
            try Array(text.utf8).withUnsafeBufferPointer { buffer in
                var reader = JSONReader(bytes: buffer)
                try reader.beginArray()
                _ = try reader.nextElement()
                return (try reader.readValue(maxBytes: maxBytes), reader.offset)
            }
        }
        #expect(try read("[[1,2],3]", maxBytes: 5) == (.array([.integer(1), .integer(2)]), 6), "exactly at the bound")
        #expect(try read("[[1,2],3]", maxBytes: 4) == (nil, 1), "one byte over: nothing read")
        #expect(try read("[123456,1]", maxBytes: 4) == (nil, 1), "a number cut at the bound is not a shorter number")
        #expect(try read("[123456]", maxBytes: 6).0 == .integer(123_456))
        #expect(try read("[true,1]", maxBytes: 2) == (nil, 1), "a literal cut at the bound")
        #expect(try read(#"["abc\u00e9",1]"#, maxBytes: 9) == (nil, 1), "an escape cut at the bound")
        #expect(throws: JSONSyntaxError.self, "a fault before the bound is a fault") { try read("[[1,,2],3,4,5,6,7]", maxBytes: 5) }
        #expect(throws: JSONSyntaxError.self, "and at the end of the text") { try read("[[1,", maxBytes: 100) }
    }

    @Test("decoding errors name the path and the rule")
    func decodingErrors() throws {
        func message(_ json: String) -> String {
            var messages: Set<String> = []
            // The request read one operation at a time fails as the one read from a whole tree.
            for decode in [
                { try ModifyRecordsRequest(jsonBytes: $0) },
                { try ModifyRecordsRequest(jsonBytes: $0, limits: Limits()) },
            ] as [([UInt8]) throws -> ModifyRecordsRequest] {
                do {
                    _ = try decode(Array(json.utf8))
                    messages.insert("decoded")
                } catch {
                    messages.insert("\(error)")
                }
            }
            return messages.count == 1 ? messages.first! : "different: \(messages)"
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
        #expect(message(#"{"zoneID": {"zoneName": "Z"}, "operations": [{"operationType": "delete", "record": {"recordName": "a"}}], "atomic": false}"#)
            == "decoded")
    }

    @Test("a records/modify body is read within bounds on each part")
    func boundedRequest() throws {
        let limits = Limits(maxOperationsPerRequest: 3, maxRecordSizeBytes: 1_000)
        func message(_ body: [String: Any]) throws -> String {
            do {
                let request = try ModifyRecordsRequest(jsonBytes: Array(JSONSerialization.data(withJSONObject: body)), limits: limits)
                return "\(request.operations.count) operations"
            } catch {
                return "\(error)"
            }
        }
        func operation(_ name: String, values: Int = 1) -> [String: Any] {
            ["operationType": "create", "record": ["recordName": name, "fields": ["l": ["value": Array(repeating: 0, count: values)]]]]
        }
        #expect(try message(["operations": [operation("a"), operation("b")], "atomic": true]) == "2 operations")
        let longest = (limits.maxOperationTextBytes - 120) / 2
        #expect(try message(["operations": [operation("a", values: longest)]]) == "1 operations")
        #expect(try message(["operations": [operation("a"), operation("b", values: limits.maxOperationTextBytes / 2)]])
            == "operations[1]: takes more than \(limits.maxOperationTextBytes) bytes of JSON text")
        #expect(try message(["operations": (0..<4).map { operation("r\($0)") }])
            == "operations: more than 3 items; the limit is 3 per request")
        #expect(try message(["operations": [], "padding": Array(repeating: 0, count: limits.maxSmallRequestBodyBytes / 2)])
            == "padding: takes more than \(limits.maxSmallRequestBodyBytes) bytes of JSON text")
    }
}
