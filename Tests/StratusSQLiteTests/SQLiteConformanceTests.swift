import Foundation
import GRDB
import StratusModel
import StratusSQLite
import StratusStorage
import StratusStorageConformance
import Testing

@Suite("SQLite storage conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StorageConformance.checks)
    func conformance(_ check: StorageConformance.Check) async throws {
        let file = try TemporaryDatabaseFile()
        defer { file.remove() }
        try await check.run(SQLiteStorage(path: file.path))
    }

    @Test("data survives reopening the file")
    func reopen() async throws {
        let file = try TemporaryDatabaseFile()
        defer { file.remove() }
        let path = file.path
        let locator = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_a")
        do {
            let storage = try SQLiteStorage(path: path)
            _ = try await storage.createZone(named: "Z", in: locator, timestamp: 1)
            _ = try await storage.modifyRecords(
                [RecordWrite(operationType: .create, recordName: "r", recordType: "T")], zone: "Z", in: locator,
                atomic: true, context: WriteContext(userRecordName: "_a", timestamp: 1))
        }
        let reopened = try SQLiteStorage(path: path)
        #expect(try await reopened.lookupRecords(names: ["r"], zone: "Z", in: locator)[0]?.recordType == "T")
    }

    @Test("a file from before migrations v9 and v10 opens: records by type and the query index are rebuilt, and queries find its records in creation order")
    func indexMigrations() async throws {
        let file = try TemporaryDatabaseFile()
        defer { file.remove() }
        let path = file.path
        try await IndexOrderCheck.writeRecords(SQLiteStorage(path: path))
        // The file as the previous release left it: both indexes keyed by name, the migrations not applied.
        let pool = try DatabasePool(path: path)
        try await pool.write { db in
            try db.execute(sql: """
                DROP INDEX records_by_type;
                CREATE INDEX records_by_type ON records (zone_id, record_type, name) WHERE deleted = 0;
                CREATE TABLE record_index_earlier (
                    zone_id INTEGER NOT NULL, record_type TEXT NOT NULL, field TEXT NOT NULL, kind INTEGER NOT NULL,
                    value NOT NULL, longitude REAL, name TEXT NOT NULL,
                    PRIMARY KEY (zone_id, record_type, field, kind, value, name)) WITHOUT ROWID;
                INSERT INTO record_index_earlier SELECT zone_id, record_type, field, kind, value, longitude, name FROM record_index;
                DROP TABLE record_index;
                ALTER TABLE record_index_earlier RENAME TO record_index;
                DELETE FROM grdb_migrations WHERE identifier LIKE 'v9:%' OR identifier LIKE 'v10:%';
                """)
        }
        try pool.close()

        try await IndexOrderCheck.checkOrder(SQLiteStorage(path: path))
        let keys = try await DatabasePool(path: path).read { db in
            try (
                String.fetchAll(db, sql: "SELECT name FROM pragma_index_info('records_by_type')"),
                String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('record_index') WHERE pk > 0 ORDER BY pk")
            )
        }
        #expect(keys.0 == ["zone_id", "record_type"])
        #expect(keys.1 == ["zone_id", "record_type", "field", "kind", "value", "created_ms", "name"])
    }

    @Test("a file from before migration v11 opens with what each account holds counted from its records")
    func usageMigration() async throws {
        let file = try TemporaryDatabaseFile()
        defer { file.remove() }
        try await UsageCheck.writeHoldings(SQLiteStorage(path: file.path))
        let pool = try DatabasePool(path: file.path)
        try await pool.write { db in
            try db.execute(sql: """
                DROP TABLE account_usage;
                DROP TABLE uploads;
                DELETE FROM grdb_migrations WHERE identifier LIKE 'v11:%';
                """)
        }
        try pool.close()
        try await UsageCheck.checkHoldings(SQLiteStorage(path: file.path))
    }

    @Test("concurrent writes share commits, each keeping its outcome: a failing atomic batch rolls back alone, the others commit in sequence order")
    func groupCommit() async throws {
        let file = try TemporaryDatabaseFile()
        defer { file.remove() }
        let storage = try SQLiteStorage(path: file.path)
        let locator = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_a")
        _ = try await storage.createZone(named: "Z", in: locator, timestamp: 1)
        let context = WriteContext(userRecordName: "_a", timestamp: 1)
        _ = try await storage.modifyRecords(
            [RecordWrite(operationType: .create, recordName: "taken", recordType: "T")], zone: "Z", in: locator,
            atomic: true, context: context)
        let before = storage.commitGroupCounts
        // 64 writers at once: even ones save two new records; odd ones an atomic batch whose second
        // record already exists, so it must leave nothing behind.
        let outcomes = try await withThrowingTaskGroup(of: (Int, ModifyRecordsOutcome).self) { group in
            for writer in 0..<64 {
                group.addTask {
                    let second = writer.isMultiple(of: 2) ? "w\(writer)-b" : "taken"
                    let outcome = try await storage.modifyRecords(
                        [RecordWrite(operationType: .create, recordName: "w\(writer)-a", recordType: "T"),
                         RecordWrite(operationType: .create, recordName: second, recordType: "T")],
                        zone: "Z", in: locator, atomic: true, context: context)
                    return (writer, outcome)
                }
            }
            return try await group.reduce(into: [Int: ModifyRecordsOutcome]()) { $0[$1.0] = $1.1 }
        }
        for (writer, outcome) in outcomes {
            let saved = outcome.results.allSatisfy { if case .success = $0 { true } else { false } }
            #expect(saved == writer.isMultiple(of: 2), "writer \(writer): \(outcome.results)")
        }
        let after = storage.commitGroupCounts
        #expect(after.writes - before.writes == 64)
        #expect(after.groups - before.groups < 64, "concurrent writes shared commits: \(before) → \(after)")
        // The feed: "taken", then two records per even writer, in one unbroken sequence.
        var names: [String] = []
        var sequences: [Int64] = []
        var position: ChangePosition?
        while true {
            let page = try await storage.recordChanges(zone: "Z", in: locator, after: position, limit: 50, recordTypes: nil)
            names += page.records.map(\.name)
            sequences += page.records.map(\.sequence)
            position = page.position
            if !page.moreComing { break }
        }
        #expect(names.count == 65 && Set(names).count == 65)
        #expect(!names.contains { $0.hasPrefix("w") && Int($0.dropFirst().prefix { $0.isNumber })! % 2 == 1 })
        #expect(sequences == Array(1...65), "no gaps: a rolled-back batch gives its sequence numbers back")
        // Still there after reopening: each answer came after its group's commit.
        let reopened = try SQLiteStorage(path: file.path)
        let found = try await reopened.lookupRecords(names: ["w0-a", "w0-b", "w1-a"], zone: "Z", in: locator)
        #expect(found[0] != nil && found[1] != nil && found[2] == nil)
    }
}

/// A database file's path in a directory of its own, which ``remove()`` deletes with everything in it.
private struct TemporaryDatabaseFile {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-\(UUID().uuidString)")
    var path: String { directory.appendingPathComponent("test.sqlite").path }

    init() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
