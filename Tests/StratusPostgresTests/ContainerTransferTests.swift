import Foundation
import StratusModel
import StratusPostgres
import StratusServer
import StratusSQLite
import StratusStorage
import StratusTestSupport
import Testing

@Suite("Moving a container from SQLite to PostgreSQL")
struct ContainerTransferTests {
    @Test("export then import keeps accounts, schemas, zones, records with their stamps, assets and subscriptions")
    func roundTrip() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try SQLiteStorage(path: directory.appendingPathComponent("source.sqlite").path)
        try await source.createContainer(ContainerInfo(identifier: "c", allowsSignUp: false, createdAt: 5))
        try await source.createAPIToken(hash: "token-hash", container: "c", name: "app", createdAt: 6)
        try await source.createUser(
            UserInfo(container: "c", recordName: "_mei", username: "mei", passwordHash: "bcrypt", createdAt: 7))
        try await source.createUser(
            UserInfo(container: "c", recordName: "_ned", username: "ned", passwordHash: "bcrypt", createdAt: 7))
        _ = try await source.setUserDisabled(true, container: "c", recordName: "_ned", at: 8)
        let key = ServerKeyInfo(
            keyID: String(repeating: "a", count: 64), container: "c", environment: .production,
            publicKeyPEM: "-----BEGIN PUBLIC KEY-----\nMFk=\n-----END PUBLIC KEY-----\n", userRecordName: "_ned",
            createdAt: 9, revokedAt: nil)
        try await source.createServerKey(key)
        try await source.setSetting(
            "signin:c", to: #"{"passwords":false,"providers":[]}"#)
        try await source.linkIdentity(
            FederatedIdentity(
                container: "c", issuer: "https://appleid.apple.com", subject: "001.mei", provider: "apple",
                userRecordName: "_mei", emailAddress: "mei@privaterelay.appleid.com", emailVerified: true, createdAt: 7,
                lastSignInAt: 9))
        let mei = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_mei")
        _ = try await source.createZone(named: "Notes", in: mei, timestamp: 8)
        _ = try await source.createZone(named: "Empty", in: mei, timestamp: 8)
        let checksum = String(repeating: "b", count: 64)
        try await source.registerAsset(checksum: checksum, size: 42, timestamp: 9)
        var writes = (0..<1_200).map { index in
            RecordWrite(
                operationType: .create, recordName: "n\(index)", recordType: "Note",
                fields: ["title": .string("note \(index)"), "rank": .int64(Int64(index))])
        }
        writes.append(
            RecordWrite(
                operationType: .create, recordName: "photo", recordType: "Photo",
                fields: [
                    "file": .asset(AssetValue(fileChecksum: checksum, size: 42)),
                    "note": .reference(Reference(recordName: "n1", action: .deleteSelf)),
                ], uploadedAssets: [checksum]))
        for start in stride(from: 0, to: writes.count, by: 400) {
            let outcome = try await source.modifyRecords(
                Array(writes[start..<min(start + 400, writes.count)]), zone: "Notes", in: mei, atomic: true,
                context: WriteContext(userRecordName: "_mei", deviceID: "phone", timestamp: 1_000 + Int64(start)))
            #expect(outcome.results.allSatisfy { (try? $0.get()) != nil })
        }
        _ = try await source.modifyRecords(
            [RecordWrite(operationType: .forceDelete, recordName: "n0")], zone: "Notes", in: mei, atomic: true,
            context: WriteContext(userRecordName: "_mei", timestamp: 3_000))
        let subscription = try SubscriptionDictionary(
            jsonBytes: Array(#"{"subscriptionID":"notes","subscriptionType":"zone","zoneID":{"zoneName":"Notes"}}"#.utf8))
        try await source.saveSubscription(
            StoredSubscription(database: mei, subscriber: "_mei", definition: subscription, createdAt: 11))
        let meiShared = DatabaseLocator(container: "c", environment: .production, scope: .shared, owner: "_mei")
        try await source.saveSubscription(
            StoredSubscription(
                database: meiShared, subscriber: "_mei",
                definition: try SubscriptionDictionary(
                    jsonBytes: Array(#"{"subscriptionID":"shared","subscriptionType":"database"}"#.utf8)),
                createdAt: 12))

        var export: [UInt8] = []
        var reports = 0
        let exported = try await ContainerTransfer.export(
            container: "c", from: source, write: { export += $0 }, progress: { _ in reports += 1 })
        #expect(exported.records == 1_200, "live records only: n0 was deleted")
        #expect(reports >= 1)

        // An export cut short (its last line, the counts, missing) is refused, not taken for whole;
        // so is a record whose fields are not a record's.
        let lines = export.split(separator: UInt8(ascii: "\n")).map(Array.init)
        let cut = try SQLiteStorage(path: directory.appendingPathComponent("cut.sqlite").path)
        let shortened = await #expect(throws: StratusError.self) {
            try await ContainerTransfer.importLines(lines.dropLast(), into: cut, now: 20_000)
        }
        #expect(shortened?.reason.contains("cut short") == true, "\(String(describing: shortened))")
        // A file of the first format (no `format`, no `end` line) still imports, whole: here it ends
        // with records, as such files did when no subscription followed them.
        var firstFormat = lines.dropLast().filter { !String(decoding: $0, as: UTF8.self).contains(#""type":"subscription""#) }
        firstFormat[0] = Array(String(decoding: firstFormat[0], as: UTF8.self).replacingOccurrences(of: #""format":3,"#, with: "").utf8)
        #expect(String(decoding: firstFormat.last!, as: UTF8.self).contains(#""type":"record""#))
        let older = try SQLiteStorage(path: directory.appendingPathComponent("older.sqlite").path)
        #expect(try await ContainerTransfer.importLines(firstFormat, into: older, now: 20_000).records == exported.records)
        let olderFeed = try await older.whileRunning {
            try await older.recordChanges(zone: "Notes", in: mei, after: nil, limit: 2_000, recordTypes: nil)
        }
        #expect(olderFeed.records.count == exported.records, "every record of the file is stored")
        let empty = try SQLiteStorage(path: directory.appendingPathComponent("empty.sqlite").path)
        await #expect(throws: StratusError.self, "an empty file imports nothing") {
            try await ContainerTransfer.importLines([[UInt8]](), into: empty, now: 20_000)
        }
        let recordLine = try #require(lines.firstIndex { String(decoding: $0, as: UTF8.self).contains(#""type":"record""#) })
        var damaged = lines
        damaged[recordLine] = Array(
            String(decoding: lines[recordLine], as: UTF8.self).replacingOccurrences(of: #""fieldsJSON":"{"#, with: #""fieldsJSON":"{\"x\":1,"#).utf8)
        let broken = try SQLiteStorage(path: directory.appendingPathComponent("broken.sqlite").path)
        let refused = await #expect(throws: StratusError.self) {
            try await ContainerTransfer.importLines(damaged, into: broken, now: 20_000)
        }
        #expect(refused?.reason.hasPrefix("line \(recordLine + 1): record") == true, "\(String(describing: refused))")

        let database = try await TestPostgres.createDatabase()
        let target = try PostgresStorage(url: database.url, maximumConnections: 4)
        try await target.whileRunning { try await Self.importAndCompare(export, exported, from: source, into: target) }
    }

    static func importAndCompare(
        _ export: [UInt8], _ exported: ContainerTransfer.Counts, from source: any StratusStorage,
        into target: PostgresStorage
    ) async throws {
        let mei = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_mei")
        let lines = export.split(separator: UInt8(ascii: "\n")).map(Array.init)
        let imported = try await ContainerTransfer.importLines(lines, into: target, now: 20_000)
        #expect(imported == exported)

        #expect(try await target.container("c") == ContainerInfo(identifier: "c", allowsSignUp: false, createdAt: 5))
        #expect(try await target.containerForAPIToken(hash: "token-hash") == "c", "the same API token keeps working")
        #expect(try await target.user(container: "c", username: "mei")?.passwordHash == "bcrypt")
        #expect(try await target.user(container: "c", username: "mei")?.disabledAt == nil)
        #expect(try await target.user(container: "c", username: "ned")?.disabledAt == 8, "a disabled account stays disabled")
        #expect(try await target.serverKeys(container: "c") == source.serverKeys(container: "c"), "server-to-server keys move")
        #expect(try await target.identities(container: "c") == source.identities(container: "c"), "identities at providers move")
        #expect(try await target.setting("signin:c") == #"{"passwords":false,"providers":[]}"#, "how users sign in moves")
        #expect(try await target.schema(container: "c", environment: .development)
                == source.schema(container: "c", environment: .development))
        #expect(try await target.zones(in: mei).map(\.name) == ["_defaultZone", "Empty", "Notes"])
        let names = ["n0", "n1", "n799", "photo"]
        let before = try await source.lookupRecords(names: names, zone: "Notes", in: mei)
        let after = try await target.lookupRecords(names: names, zone: "Notes", in: mei)
        #expect(after[0] == nil)
        for (old, new) in zip(before.dropFirst(), after.dropFirst()) {
            let old = try #require(old)
            let new = try #require(new)
            #expect(new.fieldsJSON == old.fieldsJSON && new.recordType == old.recordType)
            #expect(new.created == old.created && new.modified == old.modified, "stamps survive")
        }
        let feed = try await target.recordChanges(zone: "Notes", in: mei, after: nil, limit: 2_000, recordTypes: nil)
        #expect(feed.records.count == 1_200 && !feed.moreComing)
        #expect(try await target.collectAssets(registeredBefore: 1_000_000) == [], "the record still holds its asset")
        #expect(try await target.subscriptions(in: mei, subscriber: nil).map(\.subscriptionID) == ["notes"])
        let meiShared = DatabaseLocator(container: "c", environment: .production, scope: .shared, owner: "_mei")
        #expect(try await target.subscriptions(in: meiShared, subscriber: nil).map(\.subscriptionID) == ["shared"],
                "a shared database's subscriptions move too")
        // References still act: deleting n1 deletes the photo that points at it with DELETE_SELF.
        let outcome = try await target.modifyRecords(
            [RecordWrite(operationType: .forceDelete, recordName: "n1")], zone: "Notes", in: mei, atomic: true,
            context: WriteContext(userRecordName: "_mei", timestamp: 30_000))
        #expect(outcome.changes.map(\.record.name).sorted() == ["n1", "photo"])
        // Queries read the imported index.
        let page = try await target.queryRecords(
            RecordQuery(
                recordType: "Note", filters: [], sorts: [QuerySort(fieldName: "rank", ascending: false)],
                fields: try await target.schema(container: "c", environment: .development).recordTypes["Note"]!.fields,
                limit: 3),
            zones: ["Notes"], in: mei)
        #expect(page.items.map(\.record.name) == ["n1199", "n1198", "n1197"])

        await #expect(throws: StratusError.self, "a second import finds the container") {
            try await ContainerTransfer.importLines(lines, into: target, now: 20_000)
        }
    }
}
