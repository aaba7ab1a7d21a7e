import Foundation
import StratusServer
import StratusTestSupport
import Testing

@Suite("records/query")
struct QueryTests {
    /// Five records covering every field type a query compares.
    nonisolated(unsafe) static let items: [(String, [String: Any])] = [
        ("a", ["title": "Apple pie", "tags": ["fruit", "sweet"], "price": 3.5, "count": 10,
               "when": ["value": 1000, "type": "TIMESTAMP"], "place": ["latitude": 52.52, "longitude": 13.405]]),
        ("b", ["title": "Banana bread", "tags": ["fruit", "baked"], "price": 5.0, "count": 3,
               "when": ["value": 2000, "type": "TIMESTAMP"], "place": ["latitude": 48.8566, "longitude": 2.3522]]),
        ("c", ["title": "Carrot cake", "tags": ["vegetable", "baked", "sweet"], "price": 7.25, "count": 0,
               "when": ["value": 3000, "type": "TIMESTAMP"], "place": ["latitude": 52.50, "longitude": 13.40]]),
        ("d", ["title": "apple juice", "tags": ["fruit"], "price": 2.0, "count": 7,
               "when": ["value": 4000, "type": "TIMESTAMP"]]),
        ("e", ["title": "Zucchini", "count": 5, "when": ["value": 5000, "type": "TIMESTAMP"]]),
    ]

    static func fields(_ values: [String: Any]) -> [String: Any] {
        values.mapValues { value in
            if let dictionary = value as? [String: Any], dictionary["type"] != nil { return dictionary }
            if let price = value as? Double { return ["value": price, "type": "DOUBLE"] }
            return ["value": value]
        }
    }

    static func seeded() async throws -> (TestServer, String) {
        let server = try await TestServer.start()
        let (user, _) = try await server.signUp("quinn")
        try await server.createZone("Q", user: user)
        let reply = try await server.modify(
            items.map { operation("create", $0.0, recordType: "Item", fields: fields($0.1)) }, zone: "Q", user: user)
        #expect(reply.status == 200 && reply.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(reply.text)")
        return (server, user)
    }

    /// Runs a query to its last page; returns the record names in order and the number of pages.
    static func run(
        _ server: TestServer, user: String, recordType: String = "Item", filters: [[String: Any]] = [],
        sorts: [[String: Any]] = [], limit: Int? = nil, zone: String? = "Q", database: String = "private"
    ) async throws -> (names: [String], pages: Int) {
        var names: [String] = []
        var marker: String?
        var pages = 0
        repeat {
            var body: [String: Any] = ["query": ["recordType": recordType, "filterBy": filters, "sortBy": sorts]]
            if let zone { body["zoneID"] = ["zoneName": zone] }
            if let limit { body["resultsLimit"] = limit }
            if let marker { body["continuationMarker"] = marker }
            let reply = try await server.database(database, "records/query", body, user: user)
            try #require(reply.status == 200, "\(reply.text)")
            names += reply.records.compactMap { $0["recordName"] as? String }
            marker = reply.body["continuationMarker"] as? String
            pages += 1
        } while marker != nil && pages < 1000
        return (names, pages)
    }

    static func filter(_ comparator: String, _ field: String, _ value: Any, type: String? = nil, distance: Double? = nil)
        -> [String: Any]
    {
        var fieldValue: [String: Any] = ["value": value]
        if let type { fieldValue["type"] = type }
        var filter: [String: Any] = ["comparator": comparator, "fieldName": field, "fieldValue": fieldValue]
        if let distance { filter["distance"] = distance }
        return filter
    }

    nonisolated(unsafe) static let berlin: [String: Any] = ["latitude": 52.52, "longitude": 13.405]
    nonisolated(unsafe) static let paris: [String: Any] = ["latitude": 48.8566, "longitude": 2.3522]

    /// A filter as JSON text, so that test arguments are `Sendable`.
    static func filterJSON(
        _ comparator: String, _ field: String, _ value: Any, type: String? = nil, distance: Double? = nil
    ) -> String {
        let object = filter(comparator, field, value, type: type, distance: distance)
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: .sortedKeys), as: UTF8.self)
    }

    @Test("every comparator selects exactly the matching records", arguments: [
        (filterJSON("EQUALS", "title", "Carrot cake"), "c"),
        (filterJSON("NOT_EQUALS", "title", "Carrot cake"), "abde"),
        (filterJSON("LESS_THAN", "price", 3.5, type: "DOUBLE"), "d"),
        (filterJSON("LESS_THAN_OR_EQUALS", "price", 3.5, type: "DOUBLE"), "ad"),
        (filterJSON("GREATER_THAN", "count", 5), "ad"),
        (filterJSON("GREATER_THAN_OR_EQUALS", "when", 3000, type: "TIMESTAMP"), "cde"),
        (filterJSON("IN", "count", [0, 3], type: "INT64_LIST"), "bc"),
        (filterJSON("NOT_IN", "count", [0, 3], type: "INT64_LIST"), "ade"),
        (filterJSON("BEGINS_WITH", "title", "apple"), "d"),
        (filterJSON("NOT_BEGINS_WITH", "title", "apple"), "abce"),
        (filterJSON("LIST_CONTAINS", "tags", "baked"), "bc"),
        (filterJSON("NOT_LIST_CONTAINS", "tags", "baked"), "ade"),
        (filterJSON("LIST_CONTAINS_ANY", "tags", ["sweet", "vegetable"], type: "STRING_LIST"), "ac"),
        (filterJSON("NOT_LIST_CONTAINS_ANY", "tags", ["sweet", "vegetable"], type: "STRING_LIST"), "bde"),
        (filterJSON("LIST_CONTAINS_ALL", "tags", ["fruit", "sweet"], type: "STRING_LIST"), "a"),
        (filterJSON("NOT_LIST_CONTAINS_ALL", "tags", ["fruit", "sweet"], type: "STRING_LIST"), "bcde"),
        (filterJSON("LIST_MEMBER_BEGINS_WITH", "tags", "veg"), "c"),
        (filterJSON("NOT_LIST_MEMBER_BEGINS_WITH", "tags", "veg"), "abde"),
        (filterJSON("CONTAINS_ALL_TOKENS", "title", "APPLE pie"), "a"),
        (filterJSON("CONTAINS_ANY_TOKENS", "title", "apple cake"), "acd"),
        (filterJSON("CONTAINS_ALL_TOKENS", "___all", "cake carrot"), "c"),
        (filterJSON("NEAR", "place", berlin, type: "LOCATION", distance: 5000), "ac"),
        (filterJSON("NEAR", "place", paris, type: "LOCATION", distance: 1000), "b"),
    ])
    func comparator(filterJSON: String, expected: String) async throws {
        let filter = try #require(try JSONSerialization.jsonObject(with: Data(filterJSON.utf8)) as? [String: Any])
        let (server, user) = try await Self.seeded()
        defer { Task { try? await server.stopAndRemove() } }
        let (names, _) = try await Self.run(server, user: user, filters: [filter])
        #expect(names.sorted().joined() == expected, "\(filterJSON)")
    }

    @Test("filters combine, and sorts order by one or several fields or by distance")
    func combinationsAndSorts() async throws {
        let (server, user) = try await Self.seeded()
        defer { Task { try? await server.stopAndRemove() } }
        let both = try await Self.run(
            server, user: user,
            filters: [Self.filter("GREATER_THAN", "price", 2, type: "DOUBLE"), Self.filter("LIST_CONTAINS", "tags", "fruit")])
        #expect(both.names.sorted() == ["a", "b"])

        // Records without the sort field (e has no price) are not in a sorted result.
        #expect(try await Self.run(server, user: user, sorts: [["fieldName": "price"]]).names == ["d", "a", "b", "c"])
        #expect(try await Self.run(server, user: user, sorts: [["fieldName": "price", "ascending": false]]).names
                    == ["c", "b", "a", "d"])
        #expect(try await Self.run(server, user: user, sorts: [["fieldName": "title"]]).names == ["a", "b", "c", "e", "d"],
                "strings sort by their UTF-8 bytes: capitals first")
        let byCountThenTitle = try await Self.run(
            server, user: user, filters: [Self.filter("LESS_THAN", "count", 8)],
            sorts: [["fieldName": "count", "ascending": false], ["fieldName": "title"]])
        #expect(byCountThenTitle.names == ["d", "e", "b", "c"])
        let fromParis = try await Self.run(
            server, user: user,
            sorts: [["fieldName": "place", "relativeLocation": ["value": Self.paris, "type": "LOCATION"]]])
        #expect(fromParis.names == ["b", "c", "a"])
        let fromParisPlain = try await Self.run(
            server, user: user, sorts: [["fieldName": "place", "relativeLocation": Self.paris]])
        #expect(fromParisPlain.names == ["b", "c", "a"], "a plain Location Dictionary, as Apple's samples send it")
        // As CloudKit answers "Did not find record type": a type nobody saved yet, or a field no record held.
        let neverSaved = try await server.database(
            "private", "records/query", ["zoneID": ["zoneName": "Q"], "query": ["recordType": "NeverSaved"]], user: user)
        #expect(neverSaved.status == 404 && neverSaved.code == "NOT_FOUND" && neverSaved.reason.contains("'NeverSaved'"), "\(neverSaved.text)")
        let unknownField = try await server.database(
            "private", "records/query",
            ["zoneID": ["zoneName": "Q"], "query": ["recordType": "Item", "filterBy": [Self.filter("EQUALS", "colour", "red")]]],
            user: user)
        #expect(unknownField.status == 400 && unknownField.reason.contains("'colour'") && unknownField.reason.contains("'Item'"), "\(unknownField.text)")
    }

    @Test("paging with continuationMarker visits every record once, in every plan")
    func paging() async throws {
        try await withServer { server async throws in
            let (user, _) = try await server.signUp("pat")
            try await server.createZone("Q", user: user)
            let count = 120
            let reply = try await server.modify(
                (0..<count).map { index in
                    operation("create", String(format: "r%03d", index), recordType: "Row",
                              fields: ["rank": ["value": index], "group": ["value": index % 3], "label": ["value": "row \(index)"]])
                }, zone: "Q", user: user)
            try #require(reply.status == 200)

            let ranked = try await Self.run(server, user: user, recordType: "Row", sorts: [["fieldName": "rank"]], limit: 25)
            #expect(ranked.names == (0..<count).map { String(format: "r%03d", $0) } && ranked.pages == 5)
            let reversed = try await Self.run(
                server, user: user, recordType: "Row", sorts: [["fieldName": "rank", "ascending": false]], limit: 50)
            #expect(reversed.names == (0..<count).reversed().map { String(format: "r%03d", $0) })
            let group = try await Self.run(
                server, user: user, recordType: "Row", filters: [Self.filter("EQUALS", "group", 1)], limit: 7)
            #expect(group.names.count == 40 && Set(group.names).count == 40)
            let twoKeys = try await Self.run(
                server, user: user, recordType: "Row",
                sorts: [["fieldName": "group"], ["fieldName": "rank", "ascending": false]], limit: 11)
            let expected = (0..<count).sorted { ($0 % 3, -$0) < ($1 % 3, -$1) }.map { String(format: "r%03d", $0) }
            #expect(twoKeys.names == expected)
            let all = try await Self.run(server, user: user, recordType: "Row", limit: 33)
            #expect(all.names.count == count && Set(all.names).count == count && all.pages == 4)
            let zoneWide = try await Self.run(server, user: user, recordType: "Row", limit: 100, zone: nil)
            #expect(zoneWide.names.isEmpty, "without zoneWide, the default zone is queried")
            var body: [String: Any] = ["query": ["recordType": "Row"], "zoneWide": true, "resultsLimit": 200]
            #expect(try await server.database("private", "records/query", body, user: user).records.count == count)

            body = ["zoneID": ["zoneName": "Q"], "query": ["recordType": "Row"], "continuationMarker": "bm90IGEgbWFya2Vy"]
            let forged = try await server.database("private", "records/query", body, user: user)
            #expect(forged.status == 400 && forged.reason.contains("continuationMarker"))
        }
    }

    @Test("a zone-wide query pages through every record once, though a zone is made between its pages")
    func zoneWidePagingAcrossZoneChanges() async throws {
        try await withServer { server async throws in
            let (user, _) = try await server.signUp("pat")
            // Equal values and one creation time: only the tie-breaks order them.
            let created = try await server.modify(
                ["r0", "r1", "r2"].map { operation("create", $0, recordType: "Row", fields: ["group": ["value": 1], "rank": ["value": 1]]) },
                user: user)
            try #require(created.status == 200)
            for (shape, zone) in [
                (["filterBy": [Self.filter("EQUALS", "group", 1)]], "A"),
                (["sortBy": [["fieldName": "rank", "ascending": false]]], "B"),
            ] as [([String: Any], String)] {
                var names: [String] = []
                var marker: String?
                repeat {
                    var body: [String: Any] = [
                        "zoneWide": true, "resultsLimit": 1, "query": shape.merging(["recordType": "Row"]) { $1 },
                    ]
                    if let marker { body["continuationMarker"] = marker }
                    let page = try await server.database("private", "records/query", body, user: user)
                    try #require(page.status == 200, "\(page.text)")
                    names += page.records.compactMap { $0["recordName"] as? String }
                    marker = page.body["continuationMarker"] as? String
                    // The first page was read with one zone; the next ones with two.
                    if names.count == 1 { try await server.createZone(zone, user: user) }
                } while marker != nil && names.count < 10
                #expect(names.sorted() == ["r0", "r1", "r2"], "\(shape): \(names)")
            }
        }
    }

    @Test("LIST_CONTAINS_ALL of an empty list selects the same records in every plan")
    func emptyListContainsAll() async throws {
        let (server, user) = try await Self.seeded()
        defer { Task { try? await server.stopAndRemove() } }
        let empty = Self.filter("LIST_CONTAINS_ALL", "tags", [String](), type: "STRING_LIST")
        let alone = try await Self.run(server, user: user, filters: [empty])
        let sorted = try await Self.run(server, user: user, filters: [empty], sorts: [["fieldName": "title"]])
        let narrowed = try await Self.run(server, user: user, filters: [empty, Self.filter("EQUALS", "title", "Carrot cake")])
        #expect(alone.names.sorted() == ["a", "b", "c", "d"], "every list holds all of no values")
        #expect(sorted.names.sorted() == alone.names.sorted())
        #expect(narrowed.names == ["c"])
    }

    @Test("bad queries answer 400 naming the part and the rule")
    func badQueries() async throws {
        let (server, user) = try await Self.seeded()
        defer { Task { try? await server.stopAndRemove() } }
        func query(_ query: [String: Any]) async throws -> TestServer.Reply {
            try await server.database("private", "records/query", ["zoneID": ["zoneName": "Q"], "query": query], user: user)
        }
        let unknown = try await query(["recordType": "Item", "filterBy": [Self.filter("SIMILAR_TO", "title", "x")]])
        #expect(unknown.status == 400 && unknown.reason.contains("query.filterBy[0].comparator"), "\(unknown.text)")
        let range = try await query(
            ["recordType": "Item", "filterBy": [Self.filter("LESS_THAN", "place", Self.berlin, type: "LOCATION")]])
        #expect(range.status == 400 && range.reason.contains("place") && range.reason.contains("LESS_THAN"), "\(range.text)")
        let listSort = try await query(["recordType": "Item", "sortBy": [["fieldName": "tags"]]])
        #expect(listSort.status == 400 && listSort.reason.contains("tags"), "\(listSort.text)")
        let noType = try await query(["filterBy": []])
        #expect(noType.status == 400 && noType.reason.contains("recordType"), "\(noType.text)")
        let allWithEquals = try await query(["recordType": "Item", "filterBy": [Self.filter("EQUALS", "___all", "x")]])
        #expect(allWithEquals.status == 400 && allWithEquals.reason.contains("___all"), "\(allWithEquals.text)")
    }
}
