import Crypto
import Foundation
import Stratus
import StratusTestSupport
import Testing

@Suite("SDK: records, zones and save policies")
struct RecordTests {
    @Test("zones: save, look up, list, delete; missing zones are clear per-item errors")
    func zones() async throws {
        try await withServer { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let notes = try await database.save(RecordZone(zoneName: "Notes"))
            #expect(notes.zoneID == RecordZone.ID(zoneName: "Notes"), "own zones come back with the current-user owner")
            #expect(notes.capabilities == [.fetchChanges, .atomic])
            #expect(notes.currentChangeToken != nil)
            #expect(try await database.save(RecordZone(zoneName: "Notes")).zoneID == notes.zoneID, "saving twice is harmless")
            try await database.save(RecordZone(zoneName: "Archive"))

            #expect(try await database.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone", "Archive", "Notes"])
            #expect(try await database.recordZone(for: notes.zoneID).zoneID == notes.zoneID)
            let lookups = try await database.recordZones(for: [notes.zoneID, RecordZone.ID(zoneName: "Nope")])
            #expect((try? lookups[notes.zoneID]?.get())?.zoneID == notes.zoneID)
            #expect(lookups[RecordZone.ID(zoneName: "Nope")]?.errorCode == .zoneNotFound)

            #expect(try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Archive")).zoneName == "Archive")
            let missing = await cloudError { try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Archive")) }
            #expect(missing?.code == .zoneNotFound)
            let publicZone = await cloudError {
                try await server.signedInContainer("ann").publicCloudDatabase.save(RecordZone(zoneName: "X"))
            }
            #expect(publicZone?.code == .invalidArguments)
        }
    }

    @Test("every field type round-trips through save and fetch")
    func fieldTypes() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei", device: "phone")
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let target = try await database.save(Record(recordType: "Tag", recordID: .init(recordName: "tag-1", zoneID: zone)))
            let when = Date(timeIntervalSince1970: 1_767_225_600.123)
            var note = Record(recordType: "Note", recordID: .init(recordName: "note-1", zoneID: zone))
            note["title"] = "Groceries ✓"
            note["count"] = 3
            note["big"] = Int64.max
            note["ratio"] = 0.25
            note["pinned"] = true
            note["modified"] = when
            note["blob"] = Data([0, 1, 254, 255])
            note["tag"] = Reference(record: target, action: .deleteSelf)
            note["place"] = Location(latitude: 48.85, longitude: 2.35, horizontalAccuracy: 5)
            note["words"] = ["a", "b"]
            note["numbers"] = [Int64(1), 2, 3]
            note["dates"] = [when]
            note["empty"] = [String]()
            #expect(note.changedKeys().count == 13)
            let saved = try await database.save(note)
            #expect(saved.recordChangeTag != nil)
            #expect(saved.changedKeys().isEmpty)
            #expect(saved.creationDate != nil && saved.modificationDate != nil)
            #expect(saved.lastModifiedDeviceID == "phone")
            #expect(saved.lastModifiedUserRecordID == (try await container.userRecordID()))

            let fetched = try await database.record(for: note.recordID)
            #expect(fetched.recordChangeTag == saved.recordChangeTag)
            #expect(fetched["title"] as? String == "Groceries ✓")
            #expect(fetched["count"] as? Int64 == 3)
            #expect(fetched["count", as: Int.self] == 3)
            #expect(fetched["big"] as? Int64 == Int64.max)
            #expect(fetched["ratio"] as? Double == 0.25)
            #expect(fetched["pinned", as: Bool.self] == true)
            #expect((fetched["modified"] as? Date)?.timeIntervalSince1970 == 1_767_225_600.123)
            #expect(fetched["blob"] as? Data == Data([0, 1, 254, 255]))
            #expect((fetched["tag"] as? Reference) == Reference(record: target, action: .deleteSelf))
            #expect((fetched["place"] as? Location)?.horizontalAccuracy == 5)
            #expect(fetched["words"] as? [String] == ["a", "b"])
            #expect(fetched["numbers", as: [Int].self] == [1, 2, 3])
            #expect(fetched["dates"] as? [Date] == [Date(timeIntervalSince1970: 1_767_225_600.123)])
            #expect(fetched["empty", as: [Int64].self] == [], "an empty list reads as empty for any element type")
            #expect(fetched.allKeys() == note.allKeys())
            #expect(fetched["missing"] == nil)
        }
    }

    @Test("fetch, delete, and errors of missing records, in one call or many")
    func fetchAndDelete() async throws {
        try await withServer { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            var records: [Record] = []
            for index in 0..<3 {
                var record = Record(recordType: "Note", recordID: .init(recordName: "n\(index)", zoneID: zone))
                record["index"] = index
                records.append(record)
            }
            var inDefaultZone = Record(recordType: "Note", recordID: .init(recordName: "d0"))
            inDefaultZone["index"] = 9
            records.append(inDefaultZone)
            let results = try await database.modifyRecords(saving: records, deleting: [])
            #expect(results.saveResults.count == 4)
            #expect(results.saveResults.values.allSatisfy { (try? $0.get()) != nil })

            let ghost = Record.ID(recordName: "ghost", zoneID: zone)
            let fetched = try await database.records(for: records.map(\.recordID) + [ghost], desiredKeys: ["index"])
            #expect(fetched.count == 5)
            #expect((try fetched[inDefaultZone.recordID]?.get())?["index"] as? Int64 == 9, "records in two zones in one call")
            #expect(fetched[ghost]?.errorCode == .unknownItem)
            let missing = await cloudError { _ = try await database.record(for: ghost) }
            #expect(missing?.code == .unknownItem)
            #expect(missing?.message.contains("ghost") == true)
            let noZone = await cloudError { _ = try await database.record(for: .init(recordName: "x", zoneID: .init(zoneName: "Nope"))) }
            #expect(noZone?.code == .zoneNotFound)

            #expect(try await database.deleteRecord(withID: records[0].recordID) == records[0].recordID)
            let deletedTwice = await cloudError { try await database.deleteRecord(withID: records[0].recordID) }
            #expect(deletedTwice?.code == .unknownItem)
            let twice = await cloudError { _ = try await database.modifyRecords(saving: [records[1]], deleting: [records[1].recordID]) }
            #expect(twice?.code == .invalidArguments)
        }
    }

    @Test("the three save policies against a record changed on another device")
    func savePolicies() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            var original = Record(recordType: "Note", recordID: .init(recordName: "n", zoneID: zone))
            original["a"] = "a0"
            original["b"] = "b0"
            original = try await phone.privateCloudDatabase.save(original)

            var laptopCopy = try await laptop.privateCloudDatabase.record(for: original.recordID)
            var phoneCopy = original
            phoneCopy["a"] = "a-phone"
            phoneCopy = try await phone.privateCloudDatabase.save(phoneCopy)

            // ifServerRecordUnchanged: the laptop's copy is stale.
            laptopCopy["b"] = "b-laptop"
            let conflict = await cloudError { try await laptop.privateCloudDatabase.save(laptopCopy) }
            #expect(conflict?.code == .serverRecordChanged)
            #expect(conflict?.serverErrorCode == "CONFLICT")
            #expect(conflict?.serverRecord?["a"] as? String == "a-phone")
            #expect(conflict?.serverRecord?.recordChangeTag == phoneCopy.recordChangeTag)
            #expect(conflict?.clientRecord?["b"] as? String == "b-laptop")
            #expect(conflict?.ancestorRecord?["b"] as? String == "b0")
            #expect(conflict?.ancestorRecord?.recordChangeTag == original.recordChangeTag)

            // Merging into the server record, as CloudKit prescribes, succeeds.
            var merged = try #require(conflict?.serverRecord)
            merged["b"] = "b-laptop"
            let mergedSaved = try await laptop.privateCloudDatabase.save(merged)
            #expect(mergedSaved["a"] as? String == "a-phone")

            // changedKeys writes only the changed field, whatever the server holds.
            var stale = laptopCopy
            stale["b"] = "b-forced"
            let forced = try await laptop.privateCloudDatabase.modifyRecords(saving: [stale], deleting: [], savePolicy: .changedKeys)
            #expect((try forced.saveResults[stale.recordID]?.get()) != nil)
            var server = try await phone.privateCloudDatabase.record(for: original.recordID)
            #expect(server["a"] as? String == "a-phone", "changedKeys leaves other fields alone")
            #expect(server["b"] as? String == "b-forced")

            // allKeys writes every field of the local record; fields only the server has stay.
            server["extra"] = 1
            _ = try await phone.privateCloudDatabase.save(server)
            var whole = original
            whole["b"] = "b-whole"
            _ = try await laptop.privateCloudDatabase.modifyRecords(saving: [whole], deleting: [], savePolicy: .allKeys)
            server = try await phone.privateCloudDatabase.record(for: original.recordID)
            #expect(server["a"] as? String == "a0", "allKeys writes unchanged fields too")
            #expect(server["b"] as? String == "b-whole")
            #expect(server["extra"] as? Int64 == 1)

            // Removing a field sends a removal.
            server["extra"] = nil
            #expect(server.changedKeys() == ["extra"])
            let removed = try await phone.privateCloudDatabase.save(server)
            #expect(removed.allKeys() == ["a", "b"])
            #expect(try await laptop.privateCloudDatabase.record(for: original.recordID).allKeys() == ["a", "b"])

            // Saving a new record whose name exists is a conflict too.
            var duplicate = Record(recordType: "Note", recordID: original.recordID)
            duplicate["a"] = "dup"
            let exists = await cloudError { try await phone.privateCloudDatabase.save(duplicate) }
            #expect(exists?.code == .serverRecordChanged)
            #expect(exists?.serverRecord?["a"] as? String == "a0")
            #expect(exists?.ancestorRecord == nil)
        }
    }

    @Test("a delete conditional on a change tag fails with serverRecordChanged and the server's record once another device saved; at the current tag it deletes; without one, it deletes whatever the record holds")
    func conditionalDelete() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            var note = Record(recordType: "Note", recordID: .init(recordName: "n", zoneID: zone))
            note["text"] = "first"
            note = try await phone.privateCloudDatabase.save(note)
            let phoneTag = try #require(note.recordChangeTag)

            var laptopCopy = try await laptop.privateCloudDatabase.record(for: note.recordID)
            laptopCopy["text"] = "the laptop's"
            laptopCopy = try await laptop.privateCloudDatabase.save(laptopCopy)

            let stale = try await phone.privateCloudDatabase.modifyRecords(
                saving: [], deleting: [note.recordID], deletionChangeTags: [note.recordID: phoneTag])
            guard case .failure(let error)? = stale.deleteResults[note.recordID] else {
                Issue.record("a delete at a stale tag must fail: \(stale.deleteResults)")
                return
            }
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord?["text"] as? String == "the laptop's", "the edit the delete would have erased comes back")
            let current = try #require(error.serverRecord?.recordChangeTag)
            let deleted = try await phone.privateCloudDatabase.modifyRecords(
                saving: [], deleting: [note.recordID], deletionChangeTags: [note.recordID: current])
            #expect((try? deleted.deleteResults[note.recordID]?.get()) != nil)

            var again = Record(recordType: "Note", recordID: .init(recordName: "m", zoneID: zone))
            again["text"] = "x"
            _ = try await phone.privateCloudDatabase.save(again)
            let unconditional = try await laptop.privateCloudDatabase.modifyRecords(saving: [], deleting: [again.recordID])
            #expect((try? unconditional.deleteResults[again.recordID]?.get()) != nil)
        }
    }

    @Test("a backend signs with a server-to-server key: it writes and queries the public database as the key's user, with no one signed in; another database is refused; a wrong key is refused")
    func serverToServerKey() async throws {
        try await withServer { server in
            let privateKey = P256.Signing.PrivateKey()
            let (keyID, keyUser) = try await server.registerServerKey(privateKey.publicKey.pemRepresentation)
            func backend(_ key: ServerToServerKey) -> Container {
                Container(
                    identifier: server.container, serverURL: URL(string: server.baseURL)!, apiToken: server.apiToken,
                    configuration: Container.Configuration(
                        retryPolicy: RetryPolicy(maxAttempts: 1), serverToServerKey: key))
            }
            let signed = backend(try ServerToServerKey(keyID: keyID, privateKeyPEM: privateKey.pemRepresentation))
            var notice = Record(recordType: "Notice", recordID: Record.ID(recordName: "maintenance"))
            notice["text"] = "down at noon"
            let saved = try await signed.publicCloudDatabase.save(notice)
            #expect(saved.creatorUserRecordID?.recordName == keyUser, "written as the key's user")
            let reader = try await server.signedInContainer("mei")
            #expect(try await reader.publicCloudDatabase.record(for: notice.recordID)["text"] as? String == "down at noon")
            let found = try await signed.publicCloudDatabase.records(matching: Query(recordType: "Notice"))
            #expect(found.matchResults.map { $0.0.recordName } == ["maintenance"])

            let privateRefused = await #expect(throws: CloudError.self) {
                try await signed.privateCloudDatabase.save(RecordZone(zoneName: "Mine"))
            }
            #expect(privateRefused?.code == .permissionFailure, "\(String(describing: privateRefused))")
            let stranger = backend(try ServerToServerKey(keyID: keyID, privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation))
            let forged = await #expect(throws: CloudError.self) { try await stranger.publicCloudDatabase.save(notice) }
            #expect(forged?.code == .notAuthenticated && forged?.message.contains("does not verify") == true, "\(String(describing: forged))")
            #expect(throws: CloudError.self) { try ServerToServerKey(keyID: keyID, privateKeyPEM: "not a key") }
        }
    }

    @Test("an atomic batch fails as a whole with batchRequestFailed; a non-atomic one item by item")
    func atomicity() async throws {
        try await withServer { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let taken = try await database.save(Record(recordType: "Note", recordID: .init(recordName: "taken", zoneID: zone)))
            let batch = [
                Record(recordType: "Note", recordID: .init(recordName: "a", zoneID: zone)),
                Record(recordType: "Note", recordID: taken.recordID),
                Record(recordType: "Note", recordID: .init(recordName: "b", zoneID: zone)),
            ]
            let atomic = try await database.modifyRecords(saving: batch, deleting: [])
            func code(_ name: String, _ results: [Record.ID: Result<Record, CloudError>]) -> CloudError.Code? {
                results[.init(recordName: name, zoneID: zone)]?.errorCode
            }
            #expect(code("taken", atomic.saveResults) == .serverRecordChanged)
            #expect(code("a", atomic.saveResults) == .batchRequestFailed)
            #expect(code("b", atomic.saveResults) == .batchRequestFailed)
            let partial = try #require(atomic.partialFailure)
            #expect(partial.code == .partialFailure)
            #expect(partial.partialErrorsByItemID?.count == 3)
            #expect(partial.partialErrorsByItemID?[.record(taken.recordID)]?.code == .serverRecordChanged)
            #expect(partial.partialErrorsByItemID?[.record(taken.recordID)]?.serverRecord?.recordChangeTag == taken.recordChangeTag)
            #expect(try await database.records(for: [batch[0].recordID]).values.first.map { (try? $0.get()) == nil } == true)

            let loose = try await database.modifyRecords(saving: batch, deleting: [], atomically: false)
            #expect(code("taken", loose.saveResults) == .serverRecordChanged)
            #expect(code("a", loose.saveResults) == nil)
            #expect(loose.partialFailure?.partialErrorsByItemID?.keys.sorted { "\($0)" < "\($1)" } == [.record(taken.recordID)])
            let clean = try await database.modifyRecords(
                saving: [Record(recordType: "Note", recordID: .init(recordName: "c", zoneID: zone))], deleting: [])
            #expect(clean.partialFailure == nil)
            #expect(try await database.record(for: batch[2].recordID).recordType == "Note")
        }
    }

    @Test("system fields round-trip: a record rebuilt from them saves without a conflict, until someone else saves")
    func systemFields() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            var note = Record(recordType: "Note", recordID: .init(recordName: "n", zoneID: zone))
            note["text"] = "one"
            let saved = try await phone.privateCloudDatabase.save(note)

            let data = saved.encodeSystemFields()
            var rebuilt = try Record(systemFieldsData: data)
            #expect(rebuilt.recordID == saved.recordID)
            #expect(rebuilt.recordType == "Note")
            #expect(rebuilt.recordChangeTag == saved.recordChangeTag)
            #expect(rebuilt.creationDate == saved.creationDate)
            #expect(rebuilt.lastModifiedDeviceID == "phone")
            #expect(rebuilt.allKeys().isEmpty)
            rebuilt["text"] = "two"
            let second = try await phone.privateCloudDatabase.save(rebuilt)
            #expect(try await laptop.privateCloudDatabase.record(for: note.recordID)["text"] as? String == "two")

            // The laptop saves meanwhile: the phone's stale system fields now conflict.
            var laptopCopy = try await laptop.privateCloudDatabase.record(for: note.recordID)
            laptopCopy["text"] = "three"
            _ = try await laptop.privateCloudDatabase.save(laptopCopy)
            var stale = try Record(systemFieldsData: second.encodeSystemFields())
            stale["text"] = "four"
            let conflict = await cloudError { try await phone.privateCloudDatabase.save(stale) }
            #expect(conflict?.code == .serverRecordChanged)
            #expect(conflict?.serverRecord?["text"] as? String == "three")

            // What earlier versions wrote (`JSONEncoder`, sorted keys, integral milliseconds) still reads.
            let earlier = try Record(
                systemFieldsData: Data(
                    #"{"creationDate":1764000000123,"lastModifiedDeviceID":"phone","ownerName":"_abc","recordChangeTag":"t1","recordName":"n","recordType":"Note","version":1,"zoneName":"Notes"}"#
                        .utf8))
            #expect(earlier.recordID == Record.ID(recordName: "n", zoneID: RecordZone.ID(zoneName: "Notes", ownerName: "_abc")))
            #expect(earlier.recordChangeTag == "t1")
            #expect(earlier.creationDate.map { ($0.timeIntervalSince1970 * 1000).rounded() } == 1_764_000_000_123)
            #expect(earlier.modificationDate == nil)
            #expect(earlier.lastModifiedDeviceID == "phone")

            // A record never saved has only its name, zone and type; those come back alone.
            let unsaved = Record(recordType: "Draft", recordID: .init(recordName: "é", zoneID: zone))
            let rebuiltUnsaved = try Record(systemFieldsData: unsaved.encodeSystemFields())
            #expect(rebuiltUnsaved.recordID == unsaved.recordID)
            #expect(rebuiltUnsaved.recordType == "Draft")
            #expect(rebuiltUnsaved.recordChangeTag == nil && rebuiltUnsaved.creationDate == nil)

            let garbage = await cloudError { _ = try Record(systemFieldsData: Data("nonsense".utf8)) }
            #expect(garbage?.code == .invalidArguments)
            #expect(garbage?.message.contains("encodeSystemFields") == true)
            // Cut short, or with bytes after the last value: refused, never read as something else.
            for broken in [data.dropLast(), data + [0]] {
                let error = await cloudError { _ = try Record(systemFieldsData: Data(broken)) }
                #expect(error?.code == .invalidArguments)
            }
        }
    }

    @Test("the public database reads without signing in and lets only the creator change a record; the shared one is empty")
    func publicAndShared() async throws {
        try await withServer { server in
            let mei = try await server.signedInContainer("mei")
            var post = Record(recordType: "Post", recordID: .init(recordName: "hello"))
            post["text"] = "Hello, everyone"
            _ = try await mei.publicCloudDatabase.save(post)

            let visitor = server.makeContainer()
            #expect(try await visitor.publicCloudDatabase.record(for: post.recordID)["text"] as? String == "Hello, everyone")
            let (matches, _) = try await visitor.publicCloudDatabase.records(matching: Query(recordType: "Post"))
            #expect(matches.map(\.0) == [post.recordID])
            let anonymousWrite = await cloudError { _ = try await visitor.publicCloudDatabase.save(Record(recordType: "Post")) }
            #expect(anonymousWrite?.code == .notAuthenticated)

            let ann = try await server.signedInContainer("ann")
            var edit = try await ann.publicCloudDatabase.record(for: post.recordID)
            edit["text"] = "ann was here"
            let denied = await cloudError { _ = try await ann.publicCloudDatabase.save(edit) }
            #expect(denied?.code == .permissionFailure, "the default grants let only the creator write")

            #expect(try await mei.sharedCloudDatabase.allRecordZones().isEmpty)
            #expect(mei.sharedCloudDatabase.databaseScope == .shared)
        }
    }

    @Test("one user cannot reach another's private records through the SDK")
    func isolation() async throws {
        try await withServer { server in
            let meiContainer = try await server.signedInContainer("mei")
            let mei = meiContainer.privateCloudDatabase
            let ann = try await server.signedInContainer("ann").privateCloudDatabase
            let zone = try await mei.save(RecordZone(zoneName: "Notes")).zoneID
            var secret = Record(recordType: "Note", recordID: .init(recordName: "secret", zoneID: zone))
            secret["text"] = "mine"
            _ = try await mei.save(secret)
            let missingZone = await cloudError { _ = try await ann.record(for: secret.recordID) }
            #expect(missingZone?.code == .zoneNotFound, "ann's private database has no zone 'Notes'")

            // Naming mei as the zone's owner does not open mei's database to ann.
            let meiZone = RecordZone.ID(zoneName: "Notes", ownerName: try await meiContainer.userRecordID().recordName)
            let denied = await cloudError { _ = try await ann.record(for: .init(recordName: "secret", zoneID: meiZone)) }
            #expect(denied?.code == .permissionFailure)
            var overwrite = Record(recordType: "Note", recordID: .init(recordName: "secret", zoneID: meiZone))
            overwrite["text"] = "ann was here"
            let refused = await cloudError { _ = try await ann.save(overwrite) }
            #expect(refused?.code == .permissionFailure)
            #expect(try await mei.record(for: secret.recordID)["text"] as? String == "mine")
        }
    }
}
