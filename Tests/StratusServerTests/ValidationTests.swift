import NIOHTTP1
import Foundation
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

@Suite("bad input gets clear 4xx answers and writes nothing")
struct ValidationTests {
    @Test("malformed JSON, wrong field types, unknown operation types, bad names")
    func malformedRequests() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let path = "/database/1/\(server.container)/development/private/records/modify"
            let query = ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice]

            let cases: [(body: String, status: Int, reasonContains: String)] = [
                (#"{"operations": [ "#, 400, "not valid JSON"),
                ("", 400, "empty"),
                (#"{"operations": []}"#, 400, "operations must not be empty"),
                (#"{"zoneID": {}}"#, 400, "operations is required"),
                (#"{"operations": [{"operationType": "upsert", "record": {"recordName": "a"}}]}"#, 400,
                 "operations[0].operationType: 'upsert' is not one of create"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"n": {"value": "x", "type": "INT64"}}}}]}"#,
                 400, "operations[0].record.fields.n.value: must be a whole number"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"n": {"value": 1, "type": "FLOAT"}}}}]}"#,
                 400, "unknown field type FLOAT"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"l": {"value": {"latitude": 91, "longitude": 0}, "type": "LOCATION"}}}}]}"#,
                 400, "latitude must be between -90 and 90"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"b": {"value": "***", "type": "BYTES"}}}}]}"#,
                 400, "base64"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"x": {"value": [1, "a"]}}}}]}"#,
                 400, "list elements must all have one type"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a"}}]}"#, 400,
                 "operations[0].record.recordType is required for create"),
                (#"{"operations": [{"operationType": "update", "record": {"recordName": "a"}}]}"#, 400,
                 "operations[0].record.recordChangeTag is required for update"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T"}}, {"operationType": "delete", "record": {"recordName": "a", "recordChangeTag": "x"}}]}"#,
                 400, "appears in more than one operation"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "caf\u00e9", "recordType": "T"}}]}"#, 400,
                 "recordName must be printable ASCII"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "1Bad"}}]}"#, 400,
                 "recordType '1Bad' must start with a letter"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"bad-name": {"value": 1}}}}]}"#,
                 400, "field name 'bad-name'"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T"}}], "atomic": "yes"}"#,
                 400, "atomic must be true or false"),
                (#"{"zoneID": {"zoneName": "Other"}, "operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "zoneID": {"zoneName": "Else"}}}]}"#,
                 400, "differs from the request's zone"),
                (#"{"operations": [{"operationType": "create", "record": {"recordName": "a", "recordType": "T", "fields": {"s": {"value": ["ok", "a\u0000b"]}}}}]}"#,
                 400, "operations[0].record.fields.s.value[1]: a string holds U+0000, which Stratus refuses in all text"),
            ]
            for (body, status, reason) in cases {
                let reply = try await server.request(.POST, path, rawBody: body, query: query)
                #expect(reply.status == status, "\(body) → \(reply.text)")
                #expect(reply.code == "BAD_REQUEST", "\(body) → \(reply.text)")
                #expect(reply.reason.contains(reason), "\(body) → \(reply.reason)")
                #expect(reply.body["uuid"] is String)
            }
            // U+0000 fits no text PostgreSQL stores or compares: the JSON reader refuses it in any string of
            // any body, naming where it is.
            let nulName = try await server.database(
                "public", "users/discoverability", ["discoverable": true, "nameComponents": ["givenName": "A\u{0}"]], user: alice)
            #expect(nulName.status == 400 && nulName.code == "BAD_REQUEST", "\(nulName.text)")
            #expect(nulName.reason.contains("nameComponents.givenName: a string holds U+0000"), "\(nulName.text)")
            let nulLookup = try await server.database(
                "public", "users/lookup/email", ["users": [["emailAddress": "a\u{0}@example.com"]]], user: alice)
            #expect(nulLookup.status == 400 && nulLookup.code == "BAD_REQUEST", "\(nulLookup.text)")
            #expect(nulLookup.reason.contains("users[0].emailAddress: a string holds U+0000"), "\(nulLookup.text)")
            let longName = String(repeating: "n", count: 256)
            let tooLong = try await server.modify([operation("create", longName)], user: alice)
            #expect(tooLong.status == 400 && tooLong.reason.contains("256 characters; the limit is 255"))
            let tooMany = try await server.modify((0...200).map { operation("create", "r\($0)") }, user: alice)
            #expect(tooMany.status == 400 && tooMany.reason.contains("operations: more than 200 items; the limit is 200"))

            let unknownEndpoint = try await server.database("private", "records/upsert", [String: Any](), user: alice)
            #expect(unknownEndpoint.status == 404 && unknownEndpoint.code == "NOT_FOUND")

            let feed = try await server.database("private", "zones/list", user: alice)
            #expect(feed.zones.count == 1)
            let lookup = try await server.database("private", "records/lookup", ["records": [["recordName": "a"]]], user: alice)
            #expect(lookup.records.first?["serverErrorCode"] as? String == "NOT_FOUND", "no rejected request wrote anything")
        }
    }

    @Test("lists a server compares or binds one by one are bounded, and a reason quoting a huge name is clipped")
    func boundedLists() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let saved = try await server.modify(
                [operation("create", "n1", fields: ["n": ["value": 1], "tags": ["value": ["a", "b"]]])], user: alice)
            #expect(saved.status == 200, "\(saved.text)")
            func query(_ filter: [String: Any]) async throws -> TestServer.Reply {
                try await server.database(
                    "private", "records/query", ["query": ["recordType": "Note", "filterBy": [filter]]], user: alice)
            }
            let many = Array(repeating: 7, count: Limits.maxValuesPerList + 1)
            let tooMany = try await query(["comparator": "IN", "fieldName": "n", "fieldValue": ["value": many, "type": "INT64_LIST"]])
            #expect(tooMany.status == 400 && tooMany.code == "BAD_REQUEST", "\(tooMany.text)")
            #expect(tooMany.reason.contains("query.filterBy[0].fieldValue") && tooMany.reason.contains("holds 1001 values"), "\(tooMany.reason)")
            let words = Array(repeating: "w", count: Limits.maxValuesPerList + 1).enumerated().map { "w\($0.offset)" }
            let tooManyTokens = try await query(
                ["comparator": "CONTAINS_ANY_TOKENS", "fieldName": "___all", "fieldValue": ["value": words.joined(separator: " ")]])
            #expect(tooManyTokens.status == 400 && tooManyTokens.reason.contains("1001 search tokens"), "\(tooManyTokens.reason)")
            // At the bound the list is a query like any other.
            let atBound = try await query(
                ["comparator": "IN", "fieldName": "n", "fieldValue": ["value": Array(many.dropLast(2)) + [1], "type": "INT64_LIST"]])
            #expect(atBound.status == 200 && atBound.records.count == 1, "\(atBound.text.prefix(300))")
            let listed = try await query(
                ["comparator": "LIST_CONTAINS_ANY", "fieldName": "tags",
                 "fieldValue": ["value": Array(repeating: "z", count: 999) + ["b"], "type": "STRING_LIST"]])
            #expect(listed.status == 200 && listed.records.count == 1, "\(listed.text)")

            try await server.createZone("Z", user: alice)
            let types = (0...Limits.maxValuesPerList).map { "T\($0)" }
            let changes = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Z"], "recordTypes": types], user: alice)
            #expect(changes.status == 400 && changes.reason.contains("recordTypes: names 1001 record types"), "\(changes.reason)")

            // A reason quotes the name it refuses, cut short (the request log keeps the same cut reason).
            let hugeType = String(repeating: "a", count: 100_000)
            let refused = try await server.database(
                "private", "records/query", ["query": ["recordType": "1" + hugeType]], user: alice)
            #expect(refused.status == 400 && refused.reason.hasPrefix("query.recordType '1aaa"), "\(refused.reason.prefix(80))")
            #expect(refused.reason.unicodeScalars.count == ErrorDictionary.maxReasonLength + 1 && refused.reason.hasSuffix("…"))
        }
    }

    @Test("a records/modify body is refused as soon as one operation's text outgrows what a record may need")
    func boundedOperations() async throws {
        let limits = Limits(maxRecordSizeBytes: 10_000)
        try await withServer(ServerConfiguration(port: 0, limits: limits, passwordHashCost: 4)) { server async throws in
            let alice = try await server.signUp("alice").token
            func create(_ name: String, zeros: Int) -> [String: Any] {
                operation("create", name, fields: ["l": ["value": Array(repeating: 0, count: zeros), "type": "INT64_LIST"]])
            }
            let huge = try await server.modify(
                [create("small", zeros: 1), create("huge", zeros: limits.maxOperationTextBytes / 2)], user: alice)
            #expect(huge.status == 400 && huge.code == "BAD_REQUEST", "\(huge.text.prefix(300))")
            #expect(huge.reason == "operations[1]: takes more than \(limits.maxOperationTextBytes) bytes of JSON text")
            let lookup = try await server.database("private", "records/lookup", ["records": [["recordName": "small"]]], user: alice)
            #expect(lookup.records.first?["serverErrorCode"] as? String == "NOT_FOUND", "nothing of the request was written")
            // Within the text bound, a record over the size limit fails on its own, as it always did.
            let oversized = try await server.modify([create("big", zeros: 6_000)], user: alice)
            #expect(oversized.status == 200 && oversized.records.first?["serverErrorCode"] as? String == "BAD_REQUEST",
                    "\(oversized.text.prefix(300))")
        }
    }

    @Test("oversize records and request bodies")
    func oversize() async throws {
        let limits = Limits(maxRecordSizeBytes: 10_000, maxFieldsPerRecord: 4, maxRequestBodyBytes: 100_000)
        try await withServer(.init(port: 0, limits: limits, passwordHashCost: 4)) { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            let big = String(repeating: "x", count: 20_000)
            let reply = try await server.modify(
                [operation("create", "big", fields: ["text": ["value": big]]), operation("create", "small")], zone: "Z", user: alice)
            #expect(reply.records.map { $0["serverErrorCode"] as? String } == ["BAD_REQUEST", "ATOMIC_ERROR"])
            let reason = try #require(reply.records.first?["reason"] as? String)
            #expect(reason.contains("'big'") && reason.contains("the limit is 10000 bytes"), "\(reason)")

            let fields = Dictionary(uniqueKeysWithValues: (0..<5).map { ("f\($0)", ["value": $0] as [String: Any]) })
            let wide = try await server.modify([operation("create", "wide", fields: fields)], zone: "Z", user: alice)
            #expect(wide.status == 400 && wide.reason.contains("5 fields; the limit is 4"))

            let huge = try await server.modify(
                (0..<20).map { operation("create", "h\($0)", fields: ["text": ["value": String(repeating: "y", count: 9_000)]]) },
                zone: "Z", user: alice)
            #expect(huge.status == 413 && huge.code == "LIMIT_EXCEEDED", "\(huge.status) \(huge.text)")
            let capabilities = try await server.request(
                .GET, "/database/1/\(server.container)/development/capabilities", query: ["ckAPIToken": server.apiToken])
            let advertised = try #require(capabilities.body["limits"] as? [String: Any])
            #expect(advertised["maxRecordSizeBytes"] as? Int == 10_000)
            #expect(advertised["maxOperationsPerRequest"] as? Int == 200)
            #expect(try await server.readFeed(zone: "Z", user: alice).records.isEmpty)
        }
    }
}
