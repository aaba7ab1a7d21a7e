import Foundation
import StratusModel
import StratusSQLite
import StratusStorage
import StratusStorageConformance
import Testing

@Suite("SQLite storage conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StorageConformance.checks)
    func conformance(_ check: StorageConformance.Check) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteStorage(path: directory.appendingPathComponent("test.sqlite").path)
        try await check.run(storage)
    }

    @Test("data survives reopening the file")
    func reopen() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("test.sqlite").path
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
}
