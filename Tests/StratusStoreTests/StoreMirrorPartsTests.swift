import Foundation
import GRDB
@testable import Stratus
@testable import StratusStore
@testable import StratusSync
import Testing

/// The mirror's parts on their own: merging fetched records, building what to send, settling the
/// server's answer and gathering rows to share, each against an in-memory database with the store's
/// tables and no server; the store's tables versioned by a migrator.
@Suite("StratusStore: the mirror's parts, without a server")
struct StoreMirrorPartsTests {
    static let layout = MirrorLayout(
        model: StoreFoundationTests.model,
        mapping: RecordMapping(
            assetThreshold: 1_000_000, assetDirectory: FileManager.default.temporaryDirectory.appendingPathComponent("parts")),
        scope: .private)

    /// An in-memory database with the to-do tables and the store's own, migrated.
    static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE lists (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL DEFAULT '', collapsed INTEGER NOT NULL DEFAULT 0);
                    CREATE TABLE items (id BLOB PRIMARY KEY NOT NULL, listID TEXT, title TEXT, done INTEGER DEFAULT 0, attachment BLOB);
                    CREATE TABLE thumbnails (id TEXT PRIMARY KEY NOT NULL, itemID BLOB NOT NULL, bytes BLOB NOT NULL);
                    """)
        }
        try StoreMigrations.migrator.migrate(queue)
        return queue
    }

    /// The server's record of an item at change tag `tag`.
    static func serverItem(_ rowID: UUID, tag: String, title: String, done: Int64) -> Stratus.Record {
        var record = Stratus.Record(recordType: "Item", recordID: RecordMapping.recordID(rowID))
        record.recordChangeTag = tag
        record.setFieldValue(.string(title), forKey: "title")
        record.setFieldValue(.int64(done), forKey: "done")
        return record
    }

    /// An item row this device and the server agreed on at tag `t1` (title "Milk", not done).
    static func agreedItem(_ rowID: UUID, in db: GRDB.Database) throws {
        try db.execute(sql: "INSERT INTO items (id, title, done) VALUES (?, 'Milk', 0)", arguments: [StoreColumns.keyForms(rowID)[0]])
        let table = try #require(layout.model.table(named: "items"))
        let values = try layout.mapping.columnValues(of: table, rowID: rowID, columns: StoreColumns(table, in: db), in: db)
        try StoreMetadata.setServerRecord(
            serverItem(rowID, tag: "t1", title: "Milk", done: 0), values: values ?? [:], table: "items", rowID: rowID, in: db)
    }

    @Test("a fetched record that changed a column the local edit left alone merges column by column; the local side is queued to send")
    func mergeByProperty() throws {
        let queue = try Self.database()
        let rowID = UUID()
        let outcome = try queue.write { db in
            try Self.agreedItem(rowID, in: db)
            // This device renames the item (not sent yet); the server's record was marked done.
            try db.execute(sql: "UPDATE items SET title = 'Oat milk'")
            try StoreMetadata.requeue(.save, table: "items", rowID: rowID, in: db)
            var merger = try StoreMerger(layout: Self.layout, db: db)
            try merger.apply(page: [Self.serverItem(rowID, tag: "t2", title: "Milk", done: 1)], deletions: [])
            return merger.outcome
        }
        let row = try queue.read { db in try Row.fetchOne(db, sql: "SELECT title, done FROM items") }
        #expect(row?["title"] == "Oat milk")
        #expect(row?["done"] == 1)
        #expect(outcome.requeued == [.saveRecord(RecordMapping.recordID(rowID))])
        #expect(try queue.read { db in try StoreMetadata.changeTag(table: "items", rowID: rowID, in: db) } == "t2")
    }

    @Test("a fetched deletion of a row with no local change deletes it; the same record fetched again at its tag changes nothing")
    func deletionAndEcho() throws {
        let queue = try Self.database()
        let (kept, deleted) = (UUID(), UUID())
        try queue.write { db in
            try Self.agreedItem(kept, in: db)
            try db.execute(sql: "UPDATE items SET title = 'Kept' WHERE id = ?", arguments: [StoreColumns.keyForms(kept)[0]])
            try Self.agreedItem(deleted, in: db)
            var merger = try StoreMerger(layout: Self.layout, db: db)
            // The echo of the record this device holds at t1 must not overwrite the local title.
            try merger.apply(
                page: [Self.serverItem(kept, tag: "t1", title: "Milk", done: 0)],
                deletions: [(RecordMapping.recordID(deleted), "Item")])
            #expect(merger.outcome.requeued.isEmpty && merger.outcome.settled.isEmpty)
        }
        let titles = try queue.read { db in try String.fetchAll(db, sql: "SELECT title FROM items") }
        #expect(titles == ["Kept"])
    }

    @Test("what to send for a pending save is a record based on the server's last one, holding the row's values; a change the outbox no longer lists is left out")
    func exportBuildsRecords() throws {
        let queue = try Self.database()
        let (pending, settled) = (UUID(), UUID())
        let batch = try queue.write { db in
            try Self.agreedItem(pending, in: db)
            try db.execute(sql: "UPDATE items SET title = 'Bread', done = 1")
            try StoreMetadata.requeue(.save, table: "items", rowID: pending, in: db)
            return try StoreExport(layout: Self.layout).changesToSend(
                [.saveRecord(RecordMapping.recordID(pending)), .saveRecord(RecordMapping.recordID(settled))], in: db)
        }
        let record = try #require(batch.records[RecordMapping.recordID(pending)])
        #expect(record.recordChangeTag == "t1", "the save is based on the version this device knows")
        #expect(record.fieldValue(forKey: "title") == .string("Bread"))
        #expect(record.fieldValue(forKey: "done") == .int64(1))
        #expect(batch.sent.keys.sorted { $0.recordName < $1.recordName } == [RecordMapping.recordID(pending)])
        #expect(batch.unsendable.isEmpty)
    }

    @Test("the server's answer settles: a saved record confirms its entry and becomes the ancestor; a read-only refusal keeps the row as the user left it, its entry held, and the refusal kept with why")
    func settleAnswers() throws {
        let queue = try Self.database()
        let (saved, refused) = (UUID(), UUID())
        let export = StoreExport(layout: Self.layout)
        let settlement = try queue.write { db in
            try Self.agreedItem(saved, in: db)
            try Self.agreedItem(refused, in: db)
            try db.execute(sql: "UPDATE items SET title = 'Changed'")
            try db.execute(sql: "UPDATE items SET title = 'Milk' WHERE id = ?", arguments: [StoreColumns.keyForms(refused)[0]])
            try db.execute(sql: "UPDATE items SET done = 1 WHERE id = ?", arguments: [StoreColumns.keyForms(refused)[0]])
            for rowID in [saved, refused] { try StoreMetadata.requeue(.save, table: "items", rowID: rowID, in: db) }
            let batch = try export.changesToSend([saved, refused].map { .saveRecord(RecordMapping.recordID($0)) }, in: db)
            let refusedRecord = try #require(batch.records[RecordMapping.recordID(refused)])
            let answer = SyncEngine.Event.SentRecordZoneChanges(
                savedRecords: [Self.serverItem(saved, tag: "t2", title: "Changed", done: 0)],
                failedRecordSaves: [.init(record: refusedRecord, error: CloudError(.permissionFailure, "shared with you read-only"))],
                deletedRecordIDs: [], failedRecordDeletes: [:])
            var merger = try StoreMerger(layout: Self.layout, db: db)
            return try export.settle(answer, sent: batch.sent, merger: &merger, at: Date(timeIntervalSince1970: 1_000))
        }
        #expect(settlement.refused?.code == .permissionFailure)
        #expect(settlement.zonesGone.isEmpty)
        let (outbox, titles, tag) = try queue.read { db in
            (try StoreMetadata.outbox(after: -1, in: db).map(\.rowID),
             try String.fetchAll(db, sql: "SELECT title FROM items ORDER BY title"),
             try StoreMetadata.changeTag(table: "items", rowID: saved, in: db))
        }
        #expect(outbox == [refused], "the refused change waits for the app")
        #expect(titles == ["Changed", "Milk"])
        #expect(tag == "t2")
        #expect(settlement.refusedRows.keys.sorted() == [refused])
        let kept = try queue.read { db in try StoreMetadata.refusedChanges(in: db) }
        #expect(kept.map(\.rowID) == [refused] && kept.first?.error.code == .permissionFailure, "the refused edit is kept, with why")
        #expect(kept.first?.date == Date(timeIntervalSince1970: 1_000))
    }

    @Test("sharing a list moves it and its items, not rows already in a share, into the share's zone, queued to save there; their old records are kept to delete")
    func sharingMovesRows() throws {
        let queue = try Self.database()
        let (list, item, otherList) = (UUID(), UUID(), UUID())
        let shareZone = RecordZone.ID(zoneName: MirrorLayout.shareZonePrefix + "a")
        let (leftBehind, entries) = try queue.write { db in
            for id in [list, otherList] { try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'List')", arguments: [id.uuidString]) }
            try db.execute(
                sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Milk')",
                arguments: [StoreColumns.keyForms(item)[0], list.uuidString])
            try StoreMetadata.setServerRecord(
                Stratus.Record(recordType: "List", recordID: RecordMapping.recordID(list)), values: [:], table: "lists", rowID: list,
                in: db)
            return try StoreSharing(layout: Self.layout).move(list, into: shareZone, in: db)
        }
        #expect(leftBehind == [RecordMapping.recordID(list)])
        #expect(Set(entries.map(\.rowID)) == [list, item])
        #expect(entries.allSatisfy { $0.zoneID == shareZone && $0.operation == .save })
        let permission = try queue.read { db in try StoreMetadata.sharePermission(zone: shareZone, in: db) }
        #expect(permission == .readWrite)
    }

    /// A database holding an item this device and the server agreed on at `t1`, then moved into a
    /// share's zone (its left-behind record kept to delete).
    static func movedItem() throws -> (queue: DatabaseQueue, item: UUID, shareZone: RecordZone.ID) {
        let queue = try database()
        let item = UUID()
        let shareZone = RecordZone.ID(zoneName: MirrorLayout.shareZonePrefix + "a")
        try queue.write { db in
            try agreedItem(item, in: db)
            _ = try StoreSharing(layout: layout).move(item, into: shareZone, in: db)
        }
        return (queue, item, shareZone)
    }

    @Test("an edit another device made to the record a moved row left behind is merged into the row in its share, not skipped; the record as this device left it changes nothing")
    func editLeftBehindMerged() throws {
        let (queue, item, shareZone) = try Self.movedItem()
        let oldRecordID = RecordMapping.recordID(item)
        let (unchanged, edited, title, outbox) = try queue.write { db in
            // The move's save reached the share; then this device renames the item there.
            try StoreMetadata.confirm(try #require(try StoreMetadata.outboxEntry(rowID: item, in: db)), in: db)
            try db.execute(sql: "UPDATE items SET done = 1")
            try StoreMetadata.requeue(.save, table: "items", rowID: item, in: db)
            var merger = try StoreMerger(layout: Self.layout, db: db)
            // The left-behind record as this device knew it: nothing to merge.
            try merger.apply(page: [Self.serverItem(item, tag: "t1", title: "Milk", done: 0)], deletions: [])
            let unchanged = merger.outcome.requeued
            // Another device, not having heard of the move, renamed it there.
            var other = try StoreMerger(layout: Self.layout, db: db)
            try other.apply(page: [Self.serverItem(item, tag: "t2", title: "Oat milk", done: 0)], deletions: [])
            return (
                unchanged, other.outcome.requeued, try String.fetchOne(db, sql: "SELECT title || ' ' || done FROM items"),
                try StoreMetadata.outbox(after: -1, in: db).map(\.rowID)
            )
        }
        #expect(unchanged.isEmpty)
        #expect(edited == [.saveRecord(RecordMapping.recordID(item, zoneID: shareZone))], "the merged row goes to its share")
        #expect(title == "Oat milk 1", "the other device's rename and this device's edit both stand")
        #expect(outbox == [item])
        let kept = try queue.read { db in try StoreMetadata.movedRecord(oldRecordID, in: db) }
        #expect(kept?.changeTag == "t2", "the left-behind record is known at its new version, and still to delete")
    }

    @Test("the delete of a record a moved row left is conditional on its tag; refused because another device edited it, the edit joins the row in its share and the delete goes again at the new tag")
    func leftBehindDeleteConditional() throws {
        let (queue, item, shareZone) = try Self.movedItem()
        let oldRecordID = RecordMapping.recordID(item)
        let export = StoreExport(layout: Self.layout)
        let (tags, requeued, title, kept) = try queue.write { db in
            let batch = try export.changesToSend([.deleteRecord(oldRecordID)], in: db)
            var conflict = CloudError(.serverRecordChanged, "record has changed")
            conflict.serverRecord = Self.serverItem(item, tag: "t2", title: "Oat milk", done: 0)
            let answer = SyncEngine.Event.SentRecordZoneChanges(
                savedRecords: [], failedRecordSaves: [], deletedRecordIDs: [], failedRecordDeletes: [oldRecordID: conflict])
            var merger = try StoreMerger(layout: Self.layout, db: db)
            _ = try export.settle(answer, sent: batch.sent, merger: &merger, at: Date())
            return (
                batch.deletionChangeTags, merger.outcome.requeued, try String.fetchOne(db, sql: "SELECT title FROM items"),
                try StoreMetadata.movedRecord(oldRecordID, in: db)
            )
        }
        #expect(tags == [oldRecordID: "t1"], "deleted only as this device knew it")
        #expect(title == "Oat milk", "the other device's edit joined the row")
        #expect(Set(requeued) == [.saveRecord(RecordMapping.recordID(item, zoneID: shareZone)), .deleteRecord(oldRecordID)])
        #expect(kept?.changeTag == "t2", "the next delete is at the new tag")
    }

    @Test("a store file made before the store's tables were versioned is migrated once: its rows and outbox kept, the migration recorded, the app's own migrations untouched")
    func unversionedFileMigrates() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let appMigrator = {
                var migrator = DatabaseMigrator()
                migrator.registerMigration("app.1") { db in try db.execute(sql: "CREATE TABLE app_notes (id INTEGER PRIMARY KEY)") }
                return migrator
            }()
            try appMigrator.migrate(pool)
            let rowID = UUID()
            var store: StratusStore? = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            try await store?.write { db in try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Groceries')", arguments: [rowID.uuidString]) }
            await store?.close()
            store = nil
            // What a store of the version before the migrator left: the same tables, no record of them.
            try await pool.write { db in
                try db.execute(
                    sql: """
                        DELETE FROM grdb_migrations WHERE identifier LIKE 'stratusstore.%'; DROP TABLE stratusstore_refused;
                        DROP TABLE stratusstore_parked;
                        ALTER TABLE stratusstore_moved DROP COLUMN change_tag; ALTER TABLE stratusstore_moved DROP COLUMN ancestor;
                        """)
            }
            store = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            let applied = try await pool.read { db in try appMigrator.appliedIdentifiers(db) }
            #expect(applied == [
                "app.1", "stratusstore.1-tables", "stratusstore.2-refused-changes", "stratusstore.3-parked-rows",
                "stratusstore.4-moved-records-kept",
            ])
            #expect(try await store?.pendingChanges().map(\.rowID) == [rowID])
            #expect(try await pool.read { db in try String.fetchAll(db, sql: "SELECT title FROM lists") } == ["Groceries"])
            try appMigrator.migrate(pool)
            await store?.close()
        }
    }

    @Test("close() ends the store: its event streams finish, calls that mirror throw, and another store opens on the same pool")
    func closeEndsTheStore() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            // No server listens there: the engine keeps retrying until it is closed.
            let container = Container(identifier: "iCloud.test.closed", serverURL: URL(string: "http://127.0.0.1:9")!, apiToken: "token")
            let mirroring = StratusStore.Mirroring(
                database: container.privateCloudDatabase, assetDirectory: directory, automaticallySync: true)
            let store = try await StratusStore.open(pool, model: StoreFoundationTests.model, mirroring: mirroring)
            let events = store.events()
            await store.close()
            for await _ in events {}
            await #expect(throws: CloudError.self) { try await store.sync() }
            let again = try await StratusStore.open(pool, model: StoreFoundationTests.model, mirroring: mirroring)
            await again.close()
        }
    }
}
