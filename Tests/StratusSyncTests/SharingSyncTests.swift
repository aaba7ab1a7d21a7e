import Foundation
import Stratus
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

/// A device whose engine syncs one database and keeps what it hears: the zones it knows and each
/// record's `caption`, with the system fields of the last known record.
actor AlbumDevice: SyncEngineDelegate {
    let container: Container
    private(set) var engine: SyncEngine!
    private(set) var zones: Set<RecordZone.ID> = []
    private(set) var captions: [Record.ID: String] = [:]
    private var records: [Record.ID: Record] = [:]

    /// The refusals the engine reported, by record.
    private(set) var refusals: [Record.ID: CloudError] = [:]

    init(_ container: Container, database: Database, transport: (any SyncTransport)? = nil) async throws {
        self.container = container
        var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: self, automaticallySync: false)
        configuration.transport = transport
        engine = try SyncEngine(configuration)
    }

    func caption(_ recordID: Record.ID, _ caption: String) {
        captions[recordID] = caption
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
    }

    func sendChanges() async throws { try await engine.sendChanges() }
    func fetchChanges() async throws { try await engine.fetchChanges() }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .fetchedDatabaseChanges(let changes):
            for modification in changes.modifications { zones.insert(modification.zoneID) }
            for deletion in changes.deletions {
                zones.remove(deletion.zoneID)
                for id in captions.keys where id.zoneID == deletion.zoneID {
                    captions[id] = nil
                    records[id] = nil
                }
            }
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications where modification.record.recordType == "Photo" {
                records[modification.record.recordID] = modification.record
                captions[modification.record.recordID] = modification.record["caption"] as? String
            }
            for deletion in changes.deletions { captions[deletion.recordID] = nil }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords { records[record.recordID] = record }
            for failure in sent.failedRecordSaves where failure.error.code == .permissionFailure {
                refusals[failure.record.recordID] = failure.error
            }
            for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
                // The server's value wins; take it.
                if let server = failure.error.serverRecord {
                    records[server.recordID] = server
                    captions[server.recordID] = server["caption"] as? String
                }
            }
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            await self.recordToSave(recordID)
        }
    }

    private func recordToSave(_ recordID: Record.ID) -> Record? {
        guard let caption = captions[recordID] else { return nil }
        var record = records[recordID] ?? Record(recordType: "Photo", recordID: recordID)
        record["caption"] = caption
        return record
    }
}

@Suite("SDK and sync engine: sharing a zone")
struct SharingSyncTests {
    @Test("an owner shares a zone by link and by invitation; participants accept through the SDK, read-only writes fail locally, and engines converge through the share until it stops")
    func shareThroughTheSDK() async throws {
        try await withServer(clientsInProcess: true) { server in
            let ada = try await server.signedInContainer("ada")
            let bob = try await server.signedInContainer("bob")
            let cy = try await server.signedInContainer("cy")
            let album = RecordZone.ID(zoneName: "Album")
            _ = try await ada.privateCloudDatabase.save(RecordZone(zoneID: album))
            var photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "p1", zoneID: album))
            photo["caption"] = "beach"
            _ = try await ada.privateCloudDatabase.save(photo)

            var share = Share(recordZoneID: album)
            share.title = "Holiday"
            share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: try await bob.userRecordID()), permission: .readWrite))
            share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: try await cy.userRecordID())))
            share = try await ada.privateCloudDatabase.save(share)
            let url = try #require(share.url)
            #expect(share.participants.map(\.role) == [.owner, .privateUser, .privateUser])
            #expect(share.participants.map(\.acceptanceStatus) == [.accepted, .pending, .pending])
            #expect(share.owner?.userIdentity.userRecordID?.recordName == (try await ada.userRecordID()).recordName)
            #expect(share.currentUserParticipant?.role == .owner)

            let metadata = try await bob.shareMetadata(for: url)
            #expect(metadata.participantRole == .privateUser && metadata.participantStatus == .pending)
            #expect(metadata.participantPermission == .readWrite)
            #expect(metadata.share.title == "Holiday")
            let sharedAlbum = metadata.share.recordID.zoneID
            let adaID = try await ada.userRecordID()
            #expect(sharedAlbum.zoneName == "Album" && sharedAlbum.ownerName == adaID.recordName)
            let accepted = try await bob.accept(metadata)
            #expect(accepted.currentUserParticipant?.acceptanceStatus == .accepted)
            try await cy.accept(try await cy.shareMetadata(for: url))

            // The read-only participant's write fails as the server would fail it, before any request.
            var attempt = Record(recordType: "Photo", recordID: Record.ID(recordName: "cy1", zoneID: sharedAlbum))
            attempt["caption"] = "mine"
            let refused = await #expect(throws: CloudError.self) { try await cy.sharedCloudDatabase.save(attempt) }
            #expect(refused?.code == .permissionFailure)
            #expect(try await cy.sharedCloudDatabase.record(for: Record.ID(recordName: "p1", zoneID: sharedAlbum))["caption"] as? String == "beach")

            // With a zone cy may write in the same call, only the read-only zone's record fails.
            let notes = RecordZone.ID(zoneName: "Notes")
            _ = try await ada.privateCloudDatabase.save(RecordZone(zoneID: notes))
            var notesShare = Share(recordZoneID: notes)
            notesShare.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: try await cy.userRecordID()), permission: .readWrite))
            notesShare = try await ada.privateCloudDatabase.save(notesShare)
            let notesMetadata = try await cy.shareMetadata(for: try #require(notesShare.url))
            try await cy.accept(notesMetadata)
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "cy-note", zoneID: notesMetadata.share.recordID.zoneID))
            note["text"] = "cy's"
            let mixed = try await cy.sharedCloudDatabase.modifyRecords(saving: [attempt, note], deleting: [])
            #expect((try? mixed.saveResults[note.recordID]?.get()) != nil, "\(mixed.saveResults)")
            #expect(mixed.partialFailure?.partialErrorsByItemID?.values.map(\.code) == [.permissionFailure])
            #expect(try await ada.privateCloudDatabase.record(for: Record.ID(recordName: "cy-note", zoneID: notes))["text"] as? String == "cy's")

            // Assets go both ways through the shared zone: the participant uploads into it, the owner
            // downloads; the participant downloads the owner's.
            let bytes = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let file = server.directory.appendingPathComponent("bob-photo.bin")
            try bytes.write(to: file)
            var upload = Record(recordType: "Photo", recordID: Record.ID(recordName: "with-image", zoneID: sharedAlbum))
            upload["image"] = Asset(fileURL: file)
            _ = try await bob.sharedCloudDatabase.save(upload)
            let ownersCopy = try await ada.privateCloudDatabase.record(for: Record.ID(recordName: "with-image", zoneID: album))
            let downloaded = try #require((ownersCopy["image"] as? Asset)?.fileURL)
            #expect(try Data(contentsOf: downloaded) == bytes)
            var adasImage = Record(recordType: "Photo", recordID: Record.ID(recordName: "owners-image", zoneID: album))
            adasImage["image"] = Asset(fileURL: file)
            _ = try await ada.privateCloudDatabase.save(adasImage)
            let participantsCopy = try await cy.sharedCloudDatabase.record(
                for: Record.ID(recordName: "owners-image", zoneID: sharedAlbum))
            #expect(try Data(contentsOf: try #require((participantsCopy["image"] as? Asset)?.fileURL)) == bytes)
            _ = try await ada.privateCloudDatabase.modifyRecords(
                saving: [], deleting: [Record.ID(recordName: "with-image", zoneID: album), adasImage.recordID])

            // Engines: the owner's on the private database, the participant's on the shared one.
            let owner = try await AlbumDevice(ada, database: ada.privateCloudDatabase)
            let participant = try await AlbumDevice(bob, database: bob.sharedCloudDatabase)
            try await owner.fetchChanges()
            try await participant.fetchChanges()
            #expect(await participant.zones == [sharedAlbum])
            let bobsP1 = Record.ID(recordName: "p1", zoneID: sharedAlbum)
            #expect(await participant.captions[bobsP1] == "beach")

            // The participant adds a photo; the owner's device gets it.
            await participant.caption(Record.ID(recordName: "p2", zoneID: sharedAlbum), "from bob")
            try await participant.sendChanges()
            try await owner.fetchChanges()
            #expect(await owner.captions[Record.ID(recordName: "p2", zoneID: album)] == "from bob")

            // Both edit p1 at once: one wins on the server, and both devices converge on it.
            await owner.caption(Record.ID(recordName: "p1", zoneID: album), "ada's")
            await participant.caption(bobsP1, "bob's")
            try await owner.sendChanges()
            try? await participant.sendChanges()
            try await participant.fetchChanges()
            try await owner.fetchChanges()
            let ownerSees = await owner.captions[Record.ID(recordName: "p1", zoneID: album)]
            #expect(ownerSees == "ada's")
            #expect(await participant.captions[bobsP1] == ownerSees)

            // The owner stops sharing; the participant's engine sees the zone go.
            _ = try await ada.privateCloudDatabase.deleteRecord(withID: share.recordID)
            try await participant.fetchChanges()
            #expect(await participant.zones.isEmpty)
            #expect(await participant.captions.isEmpty)
            let gone = await #expect(throws: CloudError.self) { try await bob.sharedCloudDatabase.record(for: bobsP1) }
            #expect(gone?.code == .zoneNotFound)
        }
    }

    @Test("a read-only participant's engine refuses the write before sending it, from the share it fetched, even in a new process; the app hears it as a failed save")
    func readOnlyRefusedBeforeSending() async throws {
        try await withServer(clientsInProcess: true) { server in
            let ada = try await server.signedInContainer("ada")
            let album = RecordZone.ID(zoneName: "Album")
            _ = try await ada.privateCloudDatabase.save(RecordZone(zoneID: album))
            var photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "p1", zoneID: album))
            photo["caption"] = "beach"
            _ = try await ada.privateCloudDatabase.save(photo)
            var share = Share(recordZoneID: album)
            share.publicPermission = .readOnly
            share = try await ada.privateCloudDatabase.save(share)
            let cy = try await server.signedInContainer("cy")
            let metadata = try await cy.accept(try await cy.shareMetadata(for: try #require(share.url)))
            let sharedAlbum = metadata.recordID.zoneID

            // Another device of cy's: its SDK has heard nothing of the share; its engine fetches it.
            let laptop = try await server.device(of: "cy")
            let transport = ThrottlingTransport(laptop.sharedCloudDatabase, refusing: 0, retryAfterSeconds: 0)
            let device = try await AlbumDevice(laptop, database: laptop.sharedCloudDatabase, transport: transport)
            try await device.fetchChanges()
            #expect(await device.engine.state.sharePermission(in: sharedAlbum) == .readOnly)
            let p1 = Record.ID(recordName: "p1", zoneID: sharedAlbum)
            await device.caption(p1, "mine now")
            try? await device.sendChanges()
            #expect(transport.writes.load(ordering: .relaxed) == 0, "nothing was sent")
            #expect(await device.refusals[p1]?.message.contains("read-only") == true)
            let status = await device.engine.state.status(of: .saveRecord(p1))
            guard case .failed(let error)? = status else {
                Issue.record("the refused change is kept as failed, not pending: \(String(describing: status))")
                return
            }
            #expect(error.code == .permissionFailure)
            #expect(try await ada.privateCloudDatabase.record(for: photo.recordID)["caption"] as? String == "beach")
        }
    }

    @Test("a share rooted at a record through the SDK: parent places records in it, the participant's engine follows records added and moved out")
    func shareAHierarchy() async throws {
        try await withServer(clientsInProcess: true) { server in
            let ada = try await server.signedInContainer("ada")
            let bob = try await server.signedInContainer("bob")
            let trips = RecordZone.ID(zoneName: "Trips")
            _ = try await ada.privateCloudDatabase.save(RecordZone(zoneID: trips))
            let album = Record(recordType: "Album", recordID: Record.ID(recordName: "album", zoneID: trips))
            var p1 = Record(recordType: "Photo", recordID: Record.ID(recordName: "p1", zoneID: trips))
            p1["caption"] = "beach"
            p1.parent = Reference(record: album, action: .none)
            var loose = Record(recordType: "Photo", recordID: Record.ID(recordName: "loose", zoneID: trips))
            loose["caption"] = "not shared"
            _ = try await ada.privateCloudDatabase.modifyRecords(saving: [album, p1, loose], deleting: [])

            var share = Share(rootRecord: album)
            share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: try await bob.userRecordID()), permission: .readWrite))
            share = try await ada.privateCloudDatabase.save(share)
            let root = try await ada.privateCloudDatabase.record(for: album.recordID)
            #expect(root.share?.recordID == share.recordID)
            #expect(try await ada.privateCloudDatabase.record(for: p1.recordID).parent?.recordID == album.recordID)

            let metadata = try await bob.shareMetadata(for: try #require(share.url))
            let sharedTrips = metadata.share.recordID.zoneID
            #expect(metadata.hierarchicalRootRecordID == Record.ID(recordName: "album", zoneID: sharedTrips))
            try await bob.accept(metadata)
            let participant = try await AlbumDevice(bob, database: bob.sharedCloudDatabase)
            try await participant.fetchChanges()
            #expect(await participant.zones == [sharedTrips])
            #expect(await participant.captions == [Record.ID(recordName: "p1", zoneID: sharedTrips): "beach"])

            // The participant adds under the root; a record with no parent in the share is refused.
            var p2 = Record(recordType: "Photo", recordID: Record.ID(recordName: "p2", zoneID: sharedTrips))
            p2["caption"] = "from bob"
            p2.parent = Reference(recordID: Record.ID(recordName: "album", zoneID: sharedTrips), action: .none)
            _ = try await bob.sharedCloudDatabase.save(p2)
            var stray = Record(recordType: "Photo", recordID: Record.ID(recordName: "stray", zoneID: sharedTrips))
            stray["caption"] = "nowhere"
            let refused = await #expect(throws: CloudError.self) { try await bob.sharedCloudDatabase.save(stray) }
            #expect(refused?.code == .permissionFailure)
            #expect(try await ada.privateCloudDatabase.record(for: Record.ID(recordName: "p2", zoneID: trips)).parent?.recordID
                == album.recordID)

            // A new root and its share in one request, the root first.
            let journal = Record(recordType: "Album", recordID: Record.ID(recordName: "journal", zoneID: trips))
            let journalShare = Share(rootRecord: journal)
            let both = try await ada.privateCloudDatabase.modifyRecords(saving: [journal, journalShare.record], deleting: [])
            #expect(both.partialFailure == nil && both.saveResults.count == 2)
            #expect(try await ada.privateCloudDatabase.record(for: journal.recordID).share?.recordID == journalShare.recordID)

            // A record in a share cannot root another one.
            let again = await #expect(throws: CloudError.self) {
                try await ada.privateCloudDatabase.save(Share(rootRecord: p1))
            }
            #expect(again?.code == .alreadyShared)

            // The owner moves p1 out of the album: the participant's engine sees it go.
            var moved = try await ada.privateCloudDatabase.record(for: p1.recordID)
            moved.parent = nil
            _ = try await ada.privateCloudDatabase.save(moved)
            try await participant.fetchChanges()
            let captions = await participant.captions
            #expect(captions == [Record.ID(recordName: "p2", zoneID: sharedTrips): "from bob"], "\(captions)")
        }
    }
}
