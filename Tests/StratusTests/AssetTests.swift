import Foundation
import Stratus
import StratusServer
import StratusTestSupport
import Testing

@Suite("SDK: assets")
struct SDKAssetTests {
    @Test("an asset saved from a file arrives as a verified local file on another device, and survives re-saves")
    func assetRoundTrip() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            let file = server.directory.appendingPathComponent("note.txt")
            let text = String(repeating: "Milk, eggs, bread. ", count: 20_000)
            try Data(text.utf8).write(to: file)
            let photo = server.directory.appendingPathComponent("photo.bin")
            try Data((0..<3_000).map { UInt8($0 % 251) }).write(to: photo)

            var note = Record(recordType: "Note", recordID: .init(recordName: "n", zoneID: zone))
            note["text"] = Asset(fileURL: file)
            note["attachments"] = [Asset(fileURL: photo), Asset(fileURL: file)]
            let saved = try await phone.privateCloudDatabase.save(note)
            let savedAsset = try #require(saved["text"] as? Asset)
            #expect(savedAsset.size == Int64(text.utf8.count))
            #expect(savedAsset.fileChecksum?.count == 64)
            #expect(savedAsset.fileURL == file)

            let fetched = try await laptop.privateCloudDatabase.record(for: note.recordID)
            let asset = try #require(fetched["text"] as? Asset)
            let local = try #require(asset.fileURL)
            #expect(local != file, "the laptop reads its own downloaded copy")
            #expect(try String(contentsOf: local, encoding: .utf8) == text)
            let attachments = try #require(fetched["attachments"] as? [Asset])
            #expect(try Data(contentsOf: try #require(attachments[0].fileURL)) == Data(contentsOf: photo))
            #expect(attachments[1].fileChecksum == asset.fileChecksum)

            // Saving the fetched record again keeps the asset without uploading it.
            var edited = fetched
            edited["title"] = "with a title"
            let resaved = try await laptop.privateCloudDatabase.save(edited)
            #expect((resaved["text"] as? Asset)?.fileChecksum == asset.fileChecksum)
            #expect((try await phone.privateCloudDatabase.record(for: note.recordID)["text"] as? Asset)?.fileChecksum
                == asset.fileChecksum)

            // A conflict's server record carries its asset files too.
            var stale = saved
            stale["title"] = "stale"
            let conflict = await cloudError { try await phone.privateCloudDatabase.save(stale) }
            let serverText = try #require(conflict?.serverRecord?["text"] as? Asset)
            #expect(try String(contentsOf: try #require(serverText.fileURL), encoding: .utf8) == text)

            let missing = server.directory.appendingPathComponent("nope.txt")
            var broken = Record(recordType: "Note", recordID: .init(recordName: "b", zoneID: zone))
            broken["text"] = Asset(fileURL: missing)
            let notFound = await cloudError { try await phone.privateCloudDatabase.save(broken) }
            #expect(notFound?.code == .assetFileNotFound)
            #expect(notFound?.message.contains("nope.txt") == true)

            // A missing file fails its own record only; in an atomic batch, its zone's other records
            // wait unsent, since the batch cannot be all or none.
            func failure(_ result: Result<Record, CloudError>?) -> CloudError.Code? {
                if case .failure(let error)? = result { error.code } else { nil }
            }
            var fine = Record(recordType: "Note", recordID: .init(recordName: "fine", zoneID: zone))
            fine["text"] = Asset(fileURL: photo)
            let separate = try await phone.privateCloudDatabase.modifyRecords(
                saving: [broken, fine], deleting: [], atomically: false)
            #expect(failure(separate.saveResults[broken.recordID]) == .assetFileNotFound)
            #expect((try? separate.saveResults[fine.recordID]?.get())?["text"] is Asset)
            var held = Record(recordType: "Note", recordID: .init(recordName: "held", zoneID: zone))
            held["title"] = "waits for its batch"
            let together = try await phone.privateCloudDatabase.modifyRecords(
                saving: [broken, held], deleting: [fine.recordID], atomically: true)
            #expect(failure(together.saveResults[broken.recordID]) == .assetFileNotFound)
            #expect(failure(together.saveResults[held.recordID]) == .batchRequestFailed)
            if case .failure(let error)? = together.deleteResults[fine.recordID] {
                #expect(error.code == .batchRequestFailed)
            } else {
                Issue.record("the deletion in the atomic batch should have failed unsent")
            }
            let unsent = await cloudError { _ = try await laptop.privateCloudDatabase.record(for: held.recordID) }
            #expect(unsent?.code == .unknownItem)
            #expect(try await laptop.privateCloudDatabase.record(for: fine.recordID)["text"] is Asset)
        }
    }

    @Test("an upload past the user's quota of uploads not yet saved fails its record alone with quotaExceeded")
    func uploadQuota() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.quotas = Quotas(perUserPendingUploadBytes: 10_000)
        try await withServer(configuration) { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let large = server.directory.appendingPathComponent("large.bin")
            try Data(repeating: 7, count: 20_000).write(to: large)
            let small = server.directory.appendingPathComponent("small.bin")
            try Data(repeating: 8, count: 1_000).write(to: small)
            var big = Record(recordType: "Note", recordID: .init(recordName: "big"))
            big["file"] = Asset(fileURL: large)
            var fits = Record(recordType: "Note", recordID: .init(recordName: "fits"))
            fits["file"] = Asset(fileURL: small)
            let results = try await phone.privateCloudDatabase.modifyRecords(
                saving: [big, fits], deleting: [], atomically: false)
            if case .failure(let error)? = results.saveResults[big.recordID] {
                #expect(error.code == .quotaExceeded, "\(error)")
            } else {
                Issue.record("the record whose upload passes the quota fails")
            }
            #expect((try? results.saveResults[fits.recordID]?.get())?["file"] is Asset)
        }
    }
}
