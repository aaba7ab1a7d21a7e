import Foundation
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
        let storage = try await PostgresStorage.connect(url: database.url, maximumConnections: 10)
        defer { storage.shutdown() }
        try await check.run(storage)
    }

    @Test("several instances on one database: migrations once, one order of changes")
    func twoInstances() async throws {
        let database = try await TestPostgres.createDatabase()
        async let first = PostgresStorage.connect(url: database.url, maximumConnections: 4)
        async let second = PostgresStorage.connect(url: database.url, maximumConnections: 4)
        let (a, b) = try await (first, second)
        defer {
            a.shutdown()
            b.shutdown()
        }
        let status = try await a.migrationStatus()
        #expect(status.applied == Array(1...status.latest))
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

    @Test("a bad URL names the rule")
    func badURL() async throws {
        await #expect(throws: StratusError.self) {
            _ = try await PostgresStorage.connect(url: "mysql://localhost/db")
        }
    }
}
