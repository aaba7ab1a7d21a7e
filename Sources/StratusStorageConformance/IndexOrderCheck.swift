import StratusModel
public import StratusStorage
import Testing

/// Records of equal indexed values come in creation order, then by name: the order a backend's
/// query index keeps them in. A backend's migration test runs ``writeRecords(_:)`` on a database,
/// takes its layout back to the earlier release's, opens it again and runs ``checkOrder(_:)``;
/// the conformance checks run both on a fresh storage.
public enum IndexOrderCheck {
    static let locator = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_a")

    /// Creates zone `Z` and records of type `T` with an indexed `flag`, not in name order: `b` and
    /// `a` at time 2, then `c` at time 1.
    public static func writeRecords(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: locator, timestamp: 1)
        try await write([note("b", 1), note("a", 1)], at: 2, storage)
        try await write([note("c", 0)], at: 1, storage)
    }

    /// Deletes `a`, creates `d` and `aa` at time 3, and pages through the records ordered by `flag`
    /// one at a time: `c`, `aa` (flag 0, created at 1 and 3), `b`, `d` (flag 1, created at 2 and 3);
    /// then resumes after cursors without a creation time, both ways.
    public static func checkOrder(_ storage: any StratusStorage) async throws {
        try await write([RecordWrite(operationType: .forceDelete, recordName: "a"), note("d", 1), note("aa", 0)], at: 3, storage)
        let fields = ["flag": FieldSchema(type: .int64, indexes: [.queryable, .sortable])]
        for (sorts, expected) in [([QuerySort(fieldName: "flag")], ["c", "aa", "b", "d"]), ([], ["c", "b", "aa", "d"])] {
            var query = RecordQuery(recordType: "T", sorts: sorts, fields: fields, limit: 1)
            var names: [String] = []
            while true {
                let page = try await storage.queryRecords(query, zones: ["Z"], in: locator)
                names += page.items.map(\.record.name)
                guard let cursor = page.cursor else { break }
                query.after = cursor
            }
            #expect(names == expected, "sorted by \(sorts.map(\.fieldName))")
        }
        // A cursor without a creation time (a marker of an earlier release) resumes at its keys and
        // name's first record in the query's direction, repeating it rather than skipping any.
        for (ascending, after, expected) in [(true, ([Int64(0)], "c"), ["c", "aa", "b", "d"]), (false, ([1], "d"), ["d", "b", "aa", "c"])] {
            let query = RecordQuery(
                recordType: "T", sorts: [QuerySort(fieldName: "flag", ascending: ascending)], fields: fields, limit: 10,
                after: QueryCursor(keys: after.0.map(QueryScalar.integer), zone: "Z", created: nil, name: after.1))
            let page = try await storage.queryRecords(query, zones: ["Z"], in: locator)
            #expect(page.items.map(\.record.name) == expected, "ascending: \(ascending)")
        }
    }

    static func run(_ storage: any StratusStorage) async throws {
        try await writeRecords(storage)
        try await checkOrder(storage)
    }

    /// A record imported over one of another creation time takes its index entries with it: after
    /// it changes, no entry of its earlier value is left for a query to find.
    static func importOver(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: locator, timestamp: 1)
        try await write([note("x", 5)], at: 10, storage)
        var writer = JSONWriter()
        RecordDictionary.writeFields(["flag": .int64(5)], to: &writer)
        let imported = StoredRecord(
            name: "x", recordType: "T", changeTag: "", fieldsJSON: writer.bytes,
            created: RecordStamp(timestamp: 20, userRecordName: "_a"), modified: RecordStamp(timestamp: 20, userRecordName: "_a"),
            deleted: false, sequence: 0)
        try await storage.importRecords([imported], zone: "Z", in: locator)
        let changed = try await storage.modifyRecords(
            [RecordWrite(operationType: .forceUpdate, recordName: "x", fields: ["flag": .int64(6)])], zone: "Z",
            in: locator, atomic: true, context: WriteContext(userRecordName: "_a", timestamp: 30))
        #expect(changed.changes.count == 1, "\(changed.results)")
        let fields = ["flag": FieldSchema(type: .int64, indexes: [.queryable, .sortable])]
        for (value, expected) in [(Int64(5), [String]()), (6, ["x"])] {
            let page = try await storage.queryRecords(
                RecordQuery(
                    recordType: "T", filters: [QueryFilter(comparator: .equals, fieldName: "flag", fieldValue: .int64(value))],
                    fields: fields, limit: 10),
                zones: ["Z"], in: locator)
            #expect(page.items.map(\.record.name) == expected, "flag = \(value)")
        }
    }

    private static func note(_ name: String, _ flag: Int64) -> RecordWrite {
        RecordWrite(operationType: .create, recordName: name, recordType: "T", fields: ["flag": .int64(flag)])
    }

    private static func write(_ writes: [RecordWrite], at time: Int64, _ storage: any StratusStorage) async throws {
        let outcome = try await storage.modifyRecords(
            writes, zone: "Z", in: locator, atomic: true, context: WriteContext(userRecordName: "_a", timestamp: time))
        #expect(outcome.changes.count == writes.count, "\(outcome.results)")
    }
}
