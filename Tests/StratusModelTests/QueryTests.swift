import Foundation
import StratusModel
import Testing

@Suite("queries")
struct QueryTests {
    static func strings(_ values: String...) -> FieldValue { .list(elementType: .string, values.map(FieldValue.string)) }
    static func integers(_ values: Int64...) -> FieldValue { .list(elementType: .int64, values.map(FieldValue.int64)) }
    static func doubles(_ values: Double...) -> FieldValue { .list(elementType: .double, values.map(FieldValue.double)) }

    static func filter(
        _ comparator: QueryComparator, _ fieldName: String, _ value: FieldValue, distance: Double? = nil
    ) -> QueryFilter {
        QueryFilter(comparator: comparator, fieldName: fieldName, fieldValue: value, distance: distance)
    }

    /// The record every case of ``cases`` is evaluated against.
    static let record: [String: FieldValue] = [
        "title": .string("Lamp"),
        "count": .int64(3),
        "price": .double(2.5),
        "created": .timestamp(1_000),
        "owner": .reference(Reference(recordName: "user-1")),
        "tags": strings("red", "blue"),
        "sizes": integers(1, 2),
        "place": .location(Location(latitude: 0, longitude: 0)),
        "blob": .bytes(Data([1])),
        "notes": .string("Crème Brûlée, the best!"),
        "none": .list(elementType: nil, []),
        "precomposed": .string("\u{E9}clair"),
    ]

    /// Filters and whether ``record`` satisfies them; every comparator has true and false cases.
    static let cases: [(QueryFilter, Bool)] = [
        (filter(.equals, "title", .string("Lamp")), true),
        (filter(.equals, "title", .string("lamp")), false),
        (filter(.equals, "count", .int64(3)), true),
        (filter(.equals, "count", .double(3)), true),
        (filter(.equals, "price", .int64(2)), false),
        (filter(.equals, "price", .double(2.5)), true),
        (filter(.equals, "created", .int64(1_000)), true),
        (filter(.equals, "owner", .reference(Reference(recordName: "user-1"))), true),
        (filter(.equals, "owner", .reference(Reference(recordName: "user-2"))), false),
        (filter(.equals, "tags", .string("red")), false),
        (filter(.equals, "precomposed", .string("e\u{301}clair")), false),
        (filter(.equals, "precomposed", .string("\u{E9}clair")), true),
        (filter(.notEquals, "title", .string("lamp")), true),
        (filter(.notEquals, "title", .string("Lamp")), false),
        (filter(.notEquals, "count", .double(3)), false),
        (filter(.notEquals, "tags", .string("green")), false),
        (filter(.notEquals, "precomposed", .string("e\u{301}clair")), true),
        (filter(.lessThan, "count", .double(3.5)), true),
        (filter(.lessThan, "count", .int64(3)), false),
        (filter(.lessThan, "price", .int64(3)), true),
        (filter(.lessThan, "title", .string("a")), true),
        (filter(.lessThan, "title", .string("Apple")), false),
        (filter(.lessThan, "created", .int64(2_000)), true),
        (filter(.lessThan, "place", .location(Location(latitude: 1, longitude: 1))), false),
        (filter(.lessThan, "sizes", .int64(5)), false),
        (filter(.lessThanOrEquals, "count", .int64(3)), true),
        (filter(.lessThanOrEquals, "count", .double(2.999)), false),
        (filter(.greaterThan, "price", .int64(2)), true),
        (filter(.greaterThan, "price", .double(2.5)), false),
        (filter(.greaterThan, "title", .string("Lam")), true),
        (filter(.greaterThan, "title", .string("Lamp")), false),
        (filter(.greaterThanOrEquals, "price", .double(2.5)), true),
        (filter(.greaterThanOrEquals, "created", .timestamp(1_001)), false),
        (filter(.near, "place", .location(Location(latitude: 0, longitude: 0.001)), distance: 200), true),
        (filter(.near, "place", .location(Location(latitude: 0, longitude: 0.001)), distance: 100), false),
        (filter(.near, "place", .location(Location(latitude: 0, longitude: 0))), false),
        (filter(.near, "title", .location(Location(latitude: 0, longitude: 0)), distance: 1e7), false),
        (filter(.containsAllTokens, "notes", .string("creme BRULEE")), true),
        (filter(.containsAllTokens, "notes", .string("Crème best")), true),
        (filter(.containsAllTokens, "notes", .string("creme pie")), false),
        (filter(.containsAllTokens, "notes", .string("!!!")), false),
        (filter(.containsAllTokens, "tags", .string("blue, red")), true),
        (filter(.containsAllTokens, "count", .string("3")), false),
        (filter(.containsAnyTokens, "notes", .string("pie creme")), true),
        (filter(.containsAnyTokens, "notes", .string("pie cake")), false),
        (filter(.containsAnyTokens, "tags", .string("green red")), true),
        (filter(.containsAnyTokens, "notes", .string("")), false),
        (filter(.in, "title", strings("Desk", "Lamp")), true),
        (filter(.in, "title", strings("Desk")), false),
        (filter(.in, "count", doubles(1, 3)), true),
        (filter(.in, "title", .list(elementType: nil, [])), false),
        (filter(.in, "tags", strings("red")), false),
        (filter(.in, "title", .string("Lamp")), false),
        (filter(.notIn, "title", strings("Desk")), true),
        (filter(.notIn, "title", strings("Lamp")), false),
        (filter(.notIn, "title", .list(elementType: nil, [])), true),
        (filter(.listContains, "tags", .string("red")), true),
        (filter(.listContains, "tags", .string("green")), false),
        (filter(.listContains, "sizes", .double(2)), true),
        (filter(.listContains, "title", .string("Lamp")), false),
        (filter(.notListContains, "tags", .string("green")), true),
        (filter(.notListContains, "tags", .string("red")), false),
        (filter(.notListContains, "none", .string("red")), true),
        (filter(.notListContains, "title", .string("x")), false),
        (filter(.listContainsAny, "tags", strings("green", "blue")), true),
        (filter(.listContainsAny, "tags", strings("green")), false),
        (filter(.notListContainsAny, "tags", strings("green")), true),
        (filter(.notListContainsAny, "tags", strings("green", "red")), false),
        (filter(.listContainsAll, "tags", strings("red", "blue")), true),
        (filter(.listContainsAll, "tags", strings("red", "green")), false),
        (filter(.listContainsAll, "sizes", integers(2, 1)), true),
        (filter(.notListContainsAll, "tags", strings("red", "green")), true),
        (filter(.notListContainsAll, "tags", strings("blue", "red")), false),
        (filter(.beginsWith, "title", .string("La")), true),
        (filter(.beginsWith, "title", .string("la")), false),
        (filter(.beginsWith, "precomposed", .string("\u{E9}")), true),
        (filter(.beginsWith, "precomposed", .string("e")), false),
        (filter(.beginsWith, "tags", .string("re")), false),
        (filter(.notBeginsWith, "title", .string("Lo")), true),
        (filter(.notBeginsWith, "title", .string("La")), false),
        (filter(.listMemberBeginsWith, "tags", .string("bl")), true),
        (filter(.listMemberBeginsWith, "tags", .string("gr")), false),
        (filter(.listMemberBeginsWith, "title", .string("La")), false),
        (filter(.notListMemberBeginsWith, "tags", .string("gr")), true),
        (filter(.notListMemberBeginsWith, "tags", .string("re")), false),
        (filter(.notListMemberBeginsWith, "none", .string("re")), true),
        (filter(.containsAllTokens, QueryFilter.allSearchableFields, .string("lamp red creme")), true),
        (filter(.containsAllTokens, QueryFilter.allSearchableFields, .string("lamp green")), false),
        (filter(.containsAnyTokens, QueryFilter.allSearchableFields, .string("green lamp")), true),
        (filter(.containsAnyTokens, QueryFilter.allSearchableFields, .string("green 3")), false),
        (filter(.equals, QueryFilter.allSearchableFields, .string("Lamp")), false),
        (filter(.notEquals, QueryFilter.allSearchableFields, .string("Lamp")), false),
    ]

    @Test("filters match records", arguments: cases)
    func matching(_ filter: QueryFilter, _ expected: Bool) {
        #expect(filter.matches(Self.record) == expected)
    }

    @Test("every comparator has matching and non-matching cases")
    func coverage() {
        for comparator in QueryComparator.allCases {
            let outcomes = Set(Self.cases.filter { $0.0.comparator == comparator }.map(\.1))
            #expect(outcomes == [true, false], "\(comparator)")
        }
        #expect(QueryComparator.allCases.count == 21)
    }

    @Test("a missing field satisfies only the negative comparators")
    func missingField() {
        let negative: Set<QueryComparator> = [
            .notEquals, .notIn, .notListContains, .notListContainsAny, .notListContainsAll, .notBeginsWith,
            .notListMemberBeginsWith,
        ]
        for comparator in QueryComparator.allCases {
            let value: FieldValue = switch comparator {
            case .in, .notIn, .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll:
                Self.strings("a")
            case .near: .location(Location(latitude: 0, longitude: 0))
            default: .string("a")
            }
            let filter = Self.filter(comparator, "absent", value, distance: comparator == .near ? 10 : nil)
            #expect(filter.matches(Self.record) == negative.contains(comparator), "\(comparator)")
        }
    }

    @Test("NEAR includes the boundary")
    func nearBoundary() {
        let center = Location(latitude: 48.8566, longitude: 2.3522)
        let here = Location(latitude: 48.8606, longitude: 2.3376)
        let distance = here.distance(to: center)
        let fields: [String: FieldValue] = ["place": .location(here)]
        #expect(Self.filter(.near, "place", .location(center), distance: distance).matches(fields))
        #expect(!Self.filter(.near, "place", .location(center), distance: distance.nextDown).matches(fields))
    }

    @Test("distances are haversine on a 6,371,008.8 m sphere")
    func distances() {
        let origin = Location(latitude: 0, longitude: 0)
        let oneDegreeNorth = Location(latitude: 1, longitude: 0)
        #expect(abs(origin.distance(to: oneDegreeNorth) - 6_371_008.8 * .pi / 180) < 1e-6)
        #expect(origin.distance(to: oneDegreeNorth) == oneDegreeNorth.distance(to: origin))
        #expect(origin.distance(to: origin) == 0)
        #expect(abs(origin.distance(to: Location(latitude: 0, longitude: 180)) - 6_371_008.8 * .pi) < 1e-6)
        let paris = Location(latitude: 48.8566, longitude: 2.3522)
        let london = Location(latitude: 51.5074, longitude: -0.1278)
        #expect(abs(paris.distance(to: london) - 343_560) < 1_000)
    }

    @Test("violations name the comparator, the field and the rule", arguments: [
        (filter(.lessThan, "place", .location(Location(latitude: 0, longitude: 0))), FieldType.location,
         "LESS_THAN does not apply to LOCATION field 'place'"),
        (filter(.in, "title", .string("Lamp")), .string, "IN needs a list value (e.g. STRING_LIST) for STRING field 'title'"),
        (filter(.in, "title", integers(1)), .string, "IN needs a list of STRING values for STRING field 'title', not INT64_LIST"),
        (filter(.near, "place", .location(Location(latitude: 0, longitude: 0))), .location,
         "NEAR needs a LOCATION value and a distance in meters"),
        (filter(.near, "place", .string("Paris"), distance: 5), .location, "NEAR needs a LOCATION value and a distance in meters"),
        (filter(.near, "title", .location(Location(latitude: 0, longitude: 0)), distance: 5), .string,
         "NEAR applies to LOCATION fields, not STRING field 'title'"),
        (filter(.containsAllTokens, "count", .string("x")), .int64, "CONTAINS_ALL_TOKENS applies to STRING fields"),
        (filter(.containsAnyTokens, "notes", .int64(1)), .string, "CONTAINS_ANY_TOKENS needs a value of type STRING"),
        (filter(.equals, "tags", .string("red")), .stringList, "EQUALS does not apply to STRING_LIST field 'tags'; use LIST_CONTAINS"),
        (filter(.notIn, "tags", strings("red")), .stringList, "use NOT_LIST_CONTAINS_ANY"),
        (filter(.lessThan, "sizes", .int64(1)), .int64List, "use the LIST_ comparators"),
        (filter(.equals, "count", .string("3")), .int64,
         "EQUALS needs a value of type INT64, DOUBLE or TIMESTAMP for INT64 field 'count', not STRING"),
        (filter(.equals, "created", .double(1)), .timestamp, "needs a value of type TIMESTAMP or INT64"),
        (filter(.equals, "blob", .bytes(Data())), .bytes, "EQUALS does not apply to BYTES field 'blob'"),
        (filter(.equals, "owner", .string("user-1")), .reference, "needs a value of type REFERENCE"),
        (filter(.listContains, "title", .string("Lamp")), .string,
         "LIST_CONTAINS applies to list fields, not STRING field 'title'; use EQUALS"),
        (filter(.listContains, "tags", .int64(1)), .stringList, "LIST_CONTAINS needs a value of type STRING for STRING_LIST field"),
        (filter(.listContainsAny, "tags", integers(1)), .stringList, "needs a list of STRING values"),
        (filter(.listContainsAll, "tags", .string("red")), .stringList, "LIST_CONTAINS_ALL needs a list value (e.g. STRING_LIST)"),
        (filter(.listContains, "photos", .string("x")), .assetList, "LIST_CONTAINS does not apply to ASSETID_LIST field"),
        (filter(.beginsWith, "tags", .string("r")), .stringList, "use LIST_MEMBER_BEGINS_WITH"),
        (filter(.listMemberBeginsWith, "title", .string("L")), .string, "use BEGINS_WITH"),
        (filter(.equals, "title", .string("x"), distance: 3), .string, "applies only to NEAR"),
        (filter(.equals, QueryFilter.allSearchableFields, .string("x")), .string, "use CONTAINS_ALL_TOKENS or CONTAINS_ANY_TOKENS"),
    ])
    func violations(_ filter: QueryFilter, _ fieldType: FieldType, _ message: String) {
        let violation = filter.violation(forFieldType: fieldType)
        #expect(violation?.contains(message) == true, "\(violation ?? "nil")")
    }

    @Test("well-formed filters have no violation", arguments: [
        (filter(.equals, "count", .double(3)), FieldType.int64),
        (filter(.equals, "price", .int64(3)), .double),
        (filter(.greaterThan, "created", .int64(3)), .timestamp),
        (filter(.equals, "owner", .reference(Reference(recordName: "r"))), .reference),
        (filter(.in, "created", integers(1, 2)), .timestamp),
        (filter(.notIn, "title", .list(elementType: nil, [])), .string),
        (filter(.listContains, "none", .string("x")), .unknownList),
        (filter(.listContainsAll, "sizes", doubles(1)), .int64List),
        (filter(.containsAnyTokens, "tags", .string("x")), .stringList),
        (filter(.notListMemberBeginsWith, "tags", .string("x")), .stringList),
        (filter(.near, "place", .location(Location(latitude: 0, longitude: 0)), distance: 1), .location),
        (filter(.containsAllTokens, QueryFilter.allSearchableFields, .string("x")), .bytes),
    ])
    func wellFormed(_ filter: QueryFilter, _ fieldType: FieldType) {
        #expect(filter.violation(forFieldType: fieldType) == nil)
    }

    @Test("scalars order as SQLite orders them")
    func scalarOrder() {
        #expect(QueryScalar.integer(3) < .real(3.5))
        #expect(QueryScalar.real(3.5) < .text("1"))
        #expect(QueryScalar.integer(Int64.max) < .text(""))
        #expect(QueryScalar.integer(3) == .real(3))
        #expect(Set<QueryScalar>([.integer(3), .real(3), .real(-0.0), .integer(0)]).count == 2)
        #expect(QueryScalar.integer(9_007_199_254_740_993) > .real(9_007_199_254_740_992), "no rounding to Double")
        #expect(QueryScalar.integer(9_007_199_254_740_993) != .real(9_007_199_254_740_992))
        #expect(QueryScalar.integer(Int64.max) < .real(0x1p63))
        #expect(QueryScalar.integer(Int64.min) == .real(-0x1p63))
        #expect(QueryScalar.real(-3.5) < .integer(-3) && QueryScalar.integer(-4) < .real(-3.5))
        #expect(QueryScalar.real(.nan) < .integer(Int64.min) && QueryScalar.real(.nan) < .real(-.infinity))
        #expect(QueryScalar.text("Z") < .text("a"))
        #expect(QueryScalar.text("ab") < .text("abc") && QueryScalar.text("abc") < .text("abd"))
        let sorted: [QueryScalar] = [.text("a"), .real(3.5), .text("Z"), .integer(3), .text("1"), .integer(-1)].sorted()
        #expect(sorted == [.integer(-1), .integer(3), .real(3.5), .text("1"), .text("Z"), .text("a")])
    }

    @Test("text compares by UTF-8 bytes, not by String's rules")
    func textBytes() {
        let precomposed = "\u{E9}"
        let decomposed = "e\u{301}"
        #expect(precomposed == decomposed, "Swift folds canonical equivalents")
        #expect(QueryScalar.text(precomposed) != .text(decomposed))
        #expect(QueryScalar.text(decomposed) < .text(precomposed))
        #expect(Set<QueryScalar>([.text(precomposed), .text(decomposed)]).count == 2)
        #expect(QueryScalar.text("\u{FFFD}") < .text("😀"), "UTF-8 order, where UTF-16 would put the emoji first")
    }

    @Test("values index as scalars")
    func scalars() {
        #expect(FieldValue.string("a").queryScalars == [.text("a")])
        #expect(FieldValue.int64(1).queryScalars == [.integer(1)])
        #expect(FieldValue.timestamp(2).queryScalars == [.integer(2)])
        #expect(FieldValue.double(2.5).queryScalars == [.real(2.5)])
        #expect(FieldValue.reference(Reference(recordName: "r")).queryScalars == [.text("r")])
        #expect(Self.strings("a", "b").queryScalars == [.text("a"), .text("b")])
        #expect(FieldValue.bytes(Data([1])).queryScalars.isEmpty)
        #expect(FieldValue.asset(AssetValue(fileChecksum: "c")).queryScalars.isEmpty)
        #expect(FieldValue.location(Location(latitude: 0, longitude: 0)).queryScalars.isEmpty)
        #expect(FieldValue.list(elementType: .location, [.location(Location(latitude: 0, longitude: 0))]).queryScalars.isEmpty)
    }

    @Test("sort keys")
    func sortKeys() {
        #expect(QuerySort(fieldName: "title").sortKey(Self.record) == .text("Lamp"))
        #expect(QuerySort(fieldName: "created", ascending: false).sortKey(Self.record) == .integer(1_000))
        #expect(QuerySort(fieldName: "absent").sortKey(Self.record) == nil)
        #expect(QuerySort(fieldName: "tags").sortKey(Self.record) == nil)
        #expect(QuerySort(fieldName: "blob").sortKey(Self.record) == nil)
        let north = Location(latitude: 1, longitude: 0)
        let byDistance = QuerySort(fieldName: "place", relativeLocation: north)
        #expect(byDistance.sortKey(Self.record) == .real(Location(latitude: 0, longitude: 0).distance(to: north)))
        #expect(QuerySort(fieldName: "title", relativeLocation: north).sortKey(Self.record) == nil)
    }

    @Test("tokens fold case and diacritics and split on non-alphanumerics", arguments: [
        ("Crème Brûlée!", ["creme", "brulee"]),
        ("Hello, hello HELLO world", ["hello", "world"]),
        ("", []),
        (" -- !! ", []),
        ("abc123 x_y 42", ["abc123", "x", "y", "42"]),
        ("nai\u{308}ve CAFE\u{301}", ["naive", "cafe"]),
        ("日本語 テキスト", ["日本語", "テキスト"]),
    ])
    func tokens(_ text: String, _ expected: [String]) {
        #expect(TextTokenizer.tokens(text) == expected)
    }

    func decode(_ json: String) throws -> QueryRecordsRequest { try QueryRecordsRequest(jsonBytes: Array(json.utf8)) }

    @Test("a CloudKit query request decodes")
    func cloudKitRequest() throws {
        let request = try decode("""
            {"zoneID": {"zoneName": "Shop"}, "resultsLimit": 50, "desiredKeys": ["title", "price"],
             "zoneWide": false, "numbersAsStrings": true, "continuationMarker": "bWFyaw",
             "query": {"recordType": "Item",
               "filterBy": [
                 {"comparator": "EQUALS", "fieldName": "title", "fieldValue": {"value": "Lamp", "type": "STRING"}},
                 {"comparator": "IN", "fieldName": "count", "fieldValue": {"value": [1, 2], "type": "INT64_LIST"}},
                 {"comparator": "GREATER_THAN", "fieldName": "price", "fieldValue": {"value": 2.5}},
                 {"comparator": "NEAR", "fieldName": "place", "distance": 500,
                  "fieldValue": {"value": {"latitude": 37.33, "longitude": -122.03}, "type": "LOCATION"}}],
               "sortBy": [
                 {"fieldName": "price", "ascending": false},
                 {"fieldName": "place", "relativeLocation": {"value": {"latitude": 1, "longitude": 2}, "type": "LOCATION"}}]}}
            """)
        let expected = QueryRecordsRequest(
            zoneID: ZoneID(zoneName: "Shop"), resultsLimit: 50,
            query: Query(
                recordType: "Item",
                filterBy: [
                    Self.filter(.equals, "title", .string("Lamp")),
                    Self.filter(.in, "count", Self.integers(1, 2)),
                    Self.filter(.greaterThan, "price", .double(2.5)),
                    Self.filter(.near, "place", .location(Location(latitude: 37.33, longitude: -122.03)), distance: 500),
                ],
                sortBy: [
                    QuerySort(fieldName: "price", ascending: false),
                    QuerySort(fieldName: "place", relativeLocation: Location(latitude: 1, longitude: 2)),
                ]),
            continuationMarker: "bWFyaw", desiredKeys: ["title", "price"], zoneWide: false, numbersAsStrings: true)
        #expect(request == expected)
        let minimal = try decode(#"{"query": {"recordType": "Item"}}"#)
        #expect(minimal == QueryRecordsRequest(query: Query(recordType: "Item")))
    }

    @Test("bad query requests fail naming the path and the rule", arguments: [
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldName": "a", "fieldValue": {"value": 1}},"#
            + #" {"comparator": "LIKE", "fieldName": "b", "fieldValue": {"value": 1}}]}}"#,
         "query.filterBy[1].comparator: 'LIKE' is not one of EQUALS, NOT_EQUALS, LESS_THAN"),
        (#"{"query": {"recordType": "T", "filterBy": [{"fieldName": "b", "fieldValue": {"value": 1}}]}}"#,
         "query.filterBy[0].comparator is required"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldName": "", "fieldValue": {"value": 1}}]}}"#,
         "query.filterBy[0].fieldName: must not be empty"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldValue": {"value": 1}}]}}"#,
         "query.filterBy[0].fieldName is required"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldName": "a"}]}}"#,
         "query.filterBy[0].fieldValue is required"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldName": "a", "fieldValue": {"value": "x", "type": "INT64"}}]}}"#,
         "query.filterBy[0].fieldValue.value: must be a whole number"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "EQUALS", "fieldName": "a", "fieldValue": {"value": 1}, "distance": 5}]}}"#,
         "query.filterBy[0].distance: applies only to NEAR, not EQUALS"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "NEAR", "fieldName": "a", "fieldValue": {"value": {"latitude": 0, "longitude": 0}}}]}}"#,
         "query.filterBy[0].distance is required"),
        (#"{"query": {"recordType": "T", "filterBy": [{"comparator": "NEAR", "fieldName": "a", "fieldValue": {"value": {"latitude": 0, "longitude": 0}}, "distance": 0}]}}"#,
         "query.filterBy[0].distance: must be more than 0 meters"),
        (#"{"query": {"recordType": "T", "sortBy": [{"fieldName": "a", "relativeLocation": {"value": "here"}}]}}"#,
         "query.sortBy[0].relativeLocation: must be a LOCATION field value, not STRING"),
        (#"{"query": {"recordType": "T", "sortBy": [{"fieldName": "a", "ascending": "yes"}]}}"#,
         "query.sortBy[0].ascending must be true or false"),
        (#"{"query": {"filterBy": []}}"#, "query.recordType is required"),
        (#"{"resultsLimit": 10}"#, "query is required"),
    ])
    func badRequests(_ json: String, _ message: String) {
        do {
            _ = try decode(json)
            Issue.record("\(json) decoded")
        } catch let error as JSONDecodingError {
            #expect(error.description.contains(message), "\(error)")
        } catch {
            Issue.record("\(json): \(error)")
        }
    }
}
