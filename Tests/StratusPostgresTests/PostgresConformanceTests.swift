import Foundation
import Synchronization
import StratusModel
import StratusPostgres
import StratusStorage
import StratusStorageConformance
import StratusTestSupport
import Testing

@Suite("PostgreSQL storage conformance")
struct PostgresConformanceTests {
    @Test(arguments: StorageConformance.checks)
    func conformance(_ check: StorageConformance.Check) async throws {
        let database = try await TestPostgres.createDatabase()
        let storage = try PostgresStorage(url: database.url, maximumConnections: 10)
        try await storage.whileRunning { try await check.run(storage) }
    }

    @Test("several instances on one database: migrations once, one order of changes")
    func twoInstances() async throws {
        let database = try await TestPostgres.createDatabase()
        let a = try PostgresStorage(url: database.url, maximumConnections: 4)
        let b = try PostgresStorage(url: database.url, maximumConnections: 4)
        // Both start at once: their migrations race for the advisory lock.
        try await a.whileRunning { try await b.whileRunning { try await Self.writeThroughBoth(a, b) } }
    }

    @Test("a database from before migration 10 starts with what each account holds counted from its records")
    func usageMigration() async throws {
        let database = try await TestPostgres.createDatabase()
        try await UsageCheck.writeHoldings(try PostgresStorage(url: database.url, maximumConnections: 2))
        for statement in ["DROP TABLE account_usage", "DROP TABLE uploads", "DELETE FROM stratus_migrations WHERE version = 10"] {
            try await TestPostgres.execute(statement, at: database.url)
        }
        try await UsageCheck.checkHoldings(try PostgresStorage(url: database.url, maximumConnections: 2))
    }

    @Test("a database from before migrations 8 and 9 starts: the query index gets creation times, and queries find its records in creation order")
    func indexMigrations() async throws {
        let database = try await TestPostgres.createDatabase()
        let first = try PostgresStorage(url: database.url, maximumConnections: 2)
        try await first.whileRunning { try await IndexOrderCheck.writeRecords(first) }
        // The database as the previous release left it: both indexes keyed by name, the migrations not applied.
        for statement in [
            "DROP INDEX records_by_type",
            "CREATE INDEX records_by_type ON records (zone_id, record_type, name) WHERE NOT deleted",
            "ALTER TABLE record_index DROP CONSTRAINT record_index_pkey",
            "ALTER TABLE record_index DROP COLUMN created_ms",
            "ALTER TABLE record_index ADD PRIMARY KEY (zone_id, record_type, field, kind, number, string, name)",
            "DELETE FROM stratus_migrations WHERE version IN (8, 9)",
        ] {
            try await TestPostgres.execute(statement, at: database.url)
        }
        let reopened = try PostgresStorage(url: database.url, maximumConnections: 2)
        try await reopened.whileRunning {
            try await IndexOrderCheck.checkOrder(reopened)
            let status = try await reopened.migrationStatus()
            let every: [String] = (1...(Int(status.latest) ?? 0)).map { String($0) }
            #expect(status.applied == every, "8 and 9 ran again")
        }
    }

    static func writeThroughBoth(_ a: PostgresStorage, _ b: PostgresStorage) async throws {
        let status = try await a.migrationStatus()
        let latest = try #require(Int(status.latest))
        let expected: [String] = (1...latest).map { String($0) }
        #expect(status.applied == expected)
        let locator = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_a")
        _ = try await a.createZone(named: "Z", in: locator, timestamp: 1)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                let storage = writer.isMultiple(of: 2) ? a : b
                group.addTask {
                    for index in 0..<25 {
                        let outcome = try await storage.modifyRecords(
                            [RecordWrite(operationType: .create, recordName: "r\(writer)-\(index)", recordType: "T")],
                            zone: "Z", in: locator, atomic: true,
                            context: WriteContext(userRecordName: "_a", timestamp: Int64(index)))
                        _ = try outcome.results[0].get()
                    }
                }
            }
            try await group.waitForAll()
        }
        let page = try await b.recordChanges(zone: "Z", in: locator, after: nil, limit: 1000, recordTypes: nil)
        #expect(page.records.count == 200)
        #expect(page.records.map(\.sequence) == Array(1...200))
    }

    @Test("messages cross instances whole and in order: a burst shares notifications; a large one, or one holding a newline, goes through the table")
    func messageBus() async throws {
        let database = try await TestPostgres.createDatabase()
        let a = try PostgresStorage(url: database.url, maximumConnections: 4)
        let b = try PostgresStorage(url: database.url, maximumConnections: 4)
        try await a.whileRunning {
            try await b.whileRunning {
                // Large messages go through a table: the instances have migrated once storage answers.
                _ = try await a.migrationStatus()
                _ = try await b.migrationStatus()
                let sender = try #require(a.messageBus)
                let listener = try #require(b.messageBus)
                let received = Mutex<[[UInt8]]>([])
                let listening = Task {
                    await listener.listen { message in
                        if case .message(let bytes) = message { received.withLock { $0.append(bytes) } }
                    }
                }
                defer { listening.cancel() }
                // LISTEN takes effect at some point after the task starts: probe until it hears.
                let probe = Array("probe".utf8)
                for _ in 0..<500 where !received.withLock({ $0.contains(probe) }) {
                    try await sender.broadcast([probe])
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(received.withLock { $0.contains(probe) }, "B listens")
                let burst: [[UInt8]] = (0..<40).map { Array(#"{"event":\#($0),"text":"café"}"#.utf8) }
                    + [Array(repeating: UInt8(ascii: "x"), count: 9_000), Array("two\nlines".utf8)]
                    + (40..<45).map { Array(#"{"event":\#($0)}"#.utf8) }
                try await sender.broadcast(burst)
                for _ in 0..<500 where received.withLock({ $0.filter { $0 != probe }.count }) < burst.count {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(received.withLock { $0.filter { $0 != probe } } == burst)
            }
        }
    }

    @Test("concurrent writes to one zone share a transaction: one lock, one statement, one commit per group")
    func groupCommit() async throws {
        let database = try await TestPostgres.createDatabase()
        let storage = try PostgresStorage(url: database.url, maximumConnections: 10)
        try await storage.whileRunning {
            let locator = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_a")
            _ = try await storage.createZone(named: "Z", in: locator, timestamp: 1)
            let before = storage.commitGroupCounts
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<64 {
                    group.addTask {
                        let outcome = try await storage.modifyRecords(
                            [RecordWrite(operationType: .create, recordName: "r\(writer)", recordType: "T")],
                            zone: "Z", in: locator, atomic: true, context: WriteContext(userRecordName: "_a", timestamp: 1))
                        _ = try outcome.results[0].get()
                    }
                }
                try await group.waitForAll()
            }
            let after = storage.commitGroupCounts
            #expect(after.writes - before.writes == 64)
            #expect(after.groups - before.groups < 64, "concurrent writes shared transactions: \(before) → \(after)")
            let page = try await storage.recordChanges(zone: "Z", in: locator, after: nil, limit: 100, recordTypes: nil)
            #expect(page.records.map(\.sequence) == Array(1...64))
        }
    }

    @Test("a bad URL names the rule")
    func badURL() async throws {
        #expect(throws: StratusError.self) {
            _ = try PostgresStorage(url: "mysql://localhost/db")
        }
    }

    @Test("a database that does not exist fails the run and the calls waiting for it, naming the database")
    func missingDatabase() async throws {
        let server = try #require(URLComponents(string: try TestPostgres.serverURL()))
        var url = server
        url.path = "/stratus_no_such_database"
        url.password = "secret"
        let storage = try PostgresStorage(url: try #require(url.string), maximumConnections: 1)
        let failure = await #expect(throws: StratusError.self) {
            try await storage.whileRunning { _ = try await storage.containers() }
        }
        #expect(failure?.reason.contains("PostgreSQL at ") == true && failure?.reason.contains("secret") == false,
                "\(String(describing: failure))")
    }
}
