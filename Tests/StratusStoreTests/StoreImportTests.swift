import Foundation
import GRDB
import Stratus
import StratusStore
import StratusTestSupport
import Synchronization
import Testing

/// A large import on a device while its app keeps reading.
@Suite("StratusStore: a large import beside a reader")
struct StoreImportTests {
    /// How many rows the import brings: 50,000, or `STRATUS_STORE_IMPORT_ROWS`.
    static let rows = ProcessInfo.processInfo.environment["STRATUS_STORE_IMPORT_ROWS"].flatMap(Int.init) ?? 50_000

    @Test("a reader keeps answering while a 50,000-row import runs: no read waits for the import, which writes each fetched batch in one transaction")
    func readerDuringImport() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                // Another device of the user put the rows on the server.
                let writer = try await server.signedInContainer("mei")
                let zoneID = RecordZone.ID(zoneName: RecordMapping.zoneName)
                _ = try await writer.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
                let list = UUID()
                var listRecord = Record(recordType: "List", recordID: RecordMapping.recordID(list))
                listRecord["title"] = "Imported"
                _ = try await writer.privateCloudDatabase.save(listRecord)
                for start in stride(from: 0, to: Self.rows, by: 200) {
                    let records = (start..<min(start + 200, Self.rows)).map { index in
                        var record = Record(recordType: "Item", recordID: RecordMapping.recordID(UUID()))
                        record["title"] = "Item \(index)"
                        record["listID"] = list.uuidString
                        record["done"] = Int64(index % 2)
                        return record
                    }
                    let results = try await writer.privateCloudDatabase.modifyRecords(saving: records, deleting: [])
                    #expect(results.partialFailure == nil)
                }

                let device = try await StoreMirrorTests.Device.open(
                    directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"))
                try await device.pool.write { db in
                    try db.execute(sql: "INSERT INTO thumbnails (id, itemID, bytes) VALUES ('local', x'00', x'00')")
                }

                // The app's reader: a point read of a local row, again and again, timed.
                let importing = Atomic<Bool>(true)
                let reader = Task {
                    var latencies: [Duration] = []
                    let clock = ContinuousClock()
                    while importing.load(ordering: .acquiring) {
                        let started = clock.now
                        _ = try await device.pool.read { db in
                            try Data.fetchOne(db, sql: "SELECT bytes FROM thumbnails WHERE id = 'local'")
                        }
                        latencies.append(clock.now - started)
                        try await Task.sleep(for: .milliseconds(2))
                    }
                    return latencies
                }
                let clock = ContinuousClock()
                let started = clock.now
                try await device.store.sync()
                let importDuration = clock.now - started
                importing.store(false, ordering: .releasing)
                let latencies = try await reader.value.sorted()

                #expect(try await device.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items") } == Self.rows)
                let slowest = try #require(latencies.last)
                let p99 = latencies[latencies.count * 99 / 100]
                print("import of \(Self.rows) rows: \(importDuration); \(latencies.count) reads, p99 \(p99), slowest \(slowest)")
                #expect(latencies.count >= 20, "the reader ran throughout the import")
                #expect(slowest * 10 < importDuration, "no read waited for a good part of the import")
            }
        }
    }
}
