import Foundation
import Stratus
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

@Suite("SDK: batches within the server's limits")
struct BatchTests {
    @Test("a 2,000-record save is split into requests within the advertised limits, and every record lands")
    func splitsLargeSaves() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        // Limits unlike CloudKit's defaults, so the SDK has to read them: 150 operations and 48 KiB per request.
        configuration.limits = Limits(maxOperationsPerRequest: 150, maxRequestBodyBytes: 48 << 10)
        try await withServer(configuration) { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Bulk")).zoneID
            let records = (0..<2_000).map { index in
                var record = Record(recordType: "Item", recordID: .init(recordName: "item-\(index)", zoneID: zone))
                record["index"] = index
                record["padding"] = String(repeating: "x", count: index % 7 == 0 ? 600 : 40)
                return record
            }
            let results = try await database.modifyRecords(saving: records, deleting: [], atomically: false)
            #expect(results.saveResults.count == 2_000)
            #expect(results.saveResults.values.allSatisfy { (try? $0.get())?.recordChangeTag != nil })

            var fetched = 0
            var token: ServerChangeToken?
            var pages = 0
            repeat {
                let page = try await database.recordZoneChanges(inZoneWith: zone, since: token)
                fetched += page.modificationResultsByID.count
                token = page.changeToken
                pages += 1
                if !page.moreComing { break }
            } while true
            #expect(fetched == 2_000)
            #expect(pages >= 10, "pages of at most maxRecordsPerResponse (200)")

            // Deleting them all is split the same way.
            let deleted = try await database.modifyRecords(saving: [], deleting: records.map(\.recordID), atomically: false)
            #expect(deleted.deleteResults.values.allSatisfy { (try? $0.get()) != nil })
        }
    }

    @Test("an atomic batch that cannot fit one request fails clearly, and nothing is written")
    func atomicBatchTooLarge() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.limits = Limits(maxOperationsPerRequest: 50, maxRequestBodyBytes: 8 << 10)
        try await withServer(configuration) { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Bulk")).zoneID
            let many = (0..<51).map { Record(recordType: "Item", recordID: .init(recordName: "m\($0)", zoneID: zone)) }
            let tooMany = await cloudError { _ = try await database.modifyRecords(saving: many, deleting: []) }
            #expect(tooMany?.code == .limitExceeded)
            #expect(tooMany?.message.contains("51 records") == true)
            #expect(tooMany?.message.contains("atomically: false") == true)

            let big = (0..<20).map { index in
                var record = Record(recordType: "Item", recordID: .init(recordName: "b\(index)", zoneID: zone))
                record["text"] = String(repeating: "y", count: 1_000)
                return record
            }
            let tooBig = await cloudError { _ = try await database.modifyRecords(saving: big, deleting: []) }
            #expect(tooBig?.code == .limitExceeded)
            #expect(tooBig?.message.contains("bytes per request") == true)
            let changes = try await database.recordZoneChanges(inZoneWith: zone, since: nil)
            #expect(changes.modificationResultsByID.isEmpty, "nothing was written")

            // The default zone is never atomic, so the same records are simply split there.
            let loose = big.map { record in
                var copy = Record(recordType: "Item", recordID: .init(recordName: record.recordID.recordName))
                copy["text"] = record["text", as: String.self]
                return copy
            }
            let saved = try await database.modifyRecords(saving: loose, deleting: [])
            #expect(saved.saveResults.values.allSatisfy { (try? $0.get()) != nil })
        }
    }
}
