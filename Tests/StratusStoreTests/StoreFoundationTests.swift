import Foundation
import GRDB
import Stratus
import StratusStore
import Testing

/// The store's first half: the model it refuses, and the changes it captures with their authors in a
/// persistent history (on a real SQLite file, reopened where it matters).
@Suite("StratusStore: model rules and change capture")
struct StoreFoundationTests {
    /// A fresh database file with the to-do example's tables, plus what `extra` adds.
    static func makePool(_ directory: URL, extra: String = "") throws -> DatabasePool {
        let pool = try DatabasePool(path: directory.appendingPathComponent("app.sqlite").path)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS lists (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL DEFAULT '',
                        collapsed INTEGER NOT NULL DEFAULT 0);
                    CREATE TABLE IF NOT EXISTS items (id BLOB PRIMARY KEY NOT NULL, listID TEXT, title TEXT, done INTEGER DEFAULT 0,
                        attachment BLOB);
                    CREATE TABLE IF NOT EXISTS thumbnails (id TEXT PRIMARY KEY NOT NULL, itemID BLOB NOT NULL, bytes BLOB NOT NULL);
                    \(extra)
                    """)
        }
        return pool
    }

    static let model = StoreModel([
        .synced("lists", recordType: "List", localColumns: ["collapsed"]),
        .synced("items", recordType: "Item", relationships: [.reference("listID", to: "lists", inverse: "items")]),
        .localOnly("thumbnails", relationships: [.reference("itemID", to: "items", inverse: "thumbnails")]),
    ])

    static func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory)
    }

    static func refusal(_ extra: String, _ model: StoreModel) async throws -> [String] {
        var messages: [String] = []
        try await withDirectory { directory in
            let pool = try makePool(directory, extra: extra)
            do {
                _ = try await StratusStore.open(pool, model: model)
            } catch let error as StoreModelError {
                messages = error.violations.map(\.description)
            }
        }
        return messages
    }

    @Test("the model checker refuses each shape mirroring cannot keep, naming the table, the column and the rule")
    func refusals() async throws {
        let cases: [(extra: String, table: StoreTable, expected: String)] = [
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, name TEXT UNIQUE);", .synced("tags"),
             "table 'tags', column 'name': a synced table can have no unique constraint"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, name TEXT); CREATE UNIQUE INDEX tags_name ON tags (name);",
             .synced("tags"), "table 'tags', column 'name': a synced table can have no unique constraint"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL);", .synced("tags"),
             "table 'tags', column 'name': a synced column must be optional or have a default"),
            ("CREATE TABLE tags (id INTEGER PRIMARY KEY, name TEXT);", .synced("tags"),
             "table 'tags', column 'id': the primary key of a synced table holds a UUID"),
            ("CREATE TABLE tags (a TEXT, b TEXT, PRIMARY KEY (a, b));", .synced("tags"),
             "table 'tags': a synced table needs a primary key of one UUID column"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, itemID BLOB NOT NULL);",
             .synced("tags", relationships: [.reference("itemID", to: "items", inverse: "tags")]),
             "table 'tags', column 'itemID': a relationship must be optional"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, thumbnailID TEXT);",
             .synced("tags", relationships: [.reference("thumbnailID", to: "thumbnails", inverse: "tags")]),
             "table 'tags', column 'thumbnailID': a synced table cannot relate to the local-only table 'thumbnails'"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, itemID BLOB);",
             .synced("tags", relationships: [.reference("itemID", to: "items", inverse: "tags", ordered: true)]),
             "table 'tags', column 'itemID': a mirrored relationship cannot be ordered"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, itemID BLOB);",
             .synced("tags", relationships: [.reference("itemID", to: "items", inverse: "")]),
             "table 'tags', column 'itemID': the relationship needs its inverse on 'items'"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, noteID TEXT);",
             .synced("tags", relationships: [.reference("noteID", to: "notes", inverse: "tags")]),
             "table 'tags', column 'noteID': the relationship's destination 'notes' is not declared in the model"),
            ("", .synced("tags"), "table 'tags': does not exist in the database"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY, name TEXT);", .synced("tags"),
             "table 'tags', column 'id': the primary key of a synced table must be NOT NULL"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, name TEXT);", .synced("tags", recordType: "Item"),
             "table 'tags': its record type 'Item' is also the record type of 'items'"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, itemID INTEGER);",
             .synced("tags", relationships: [.reference("itemID", to: "items", inverse: "tags")]),
             "table 'tags', column 'itemID': a relationship column holds a UUID"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, weight NUMERIC);", .synced("tags"),
             "table 'tags', column 'weight': a synced column needs a declared type of INTEGER, REAL, TEXT or BLOB affinity"),
            ("CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, anything);", .synced("tags"),
             "table 'tags', column 'anything': a synced column needs a declared type"),
        ]
        for (extra, table, expected) in cases {
            let messages = try await Self.refusal(extra, StoreModel(Self.model.tables + [table]))
            #expect(messages.contains { $0.hasPrefix(expected) }, "\(expected) — got \(messages)")
            #expect(messages.count == 1, "only the one broken rule: \(messages)")
        }
        // The example's own model passes.
        #expect(try await Self.refusal("", Self.model).isEmpty)
    }

    @Test("writes to synced tables are captured in their transaction with their author; local-only tables and local columns are not; rollbacks leave nothing")
    func capture() async throws {
        try await Self.withDirectory { directory in
            let pool = try Self.makePool(directory)
            let store = try await StratusStore.open(pool, model: Self.model)
            let list = UUID(), item = UUID()
            try await store.write { db in
                try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Groceries')", arguments: [list.uuidString])
                try db.execute(sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Milk')", arguments: [item, list.uuidString])
                try db.execute(sql: "INSERT INTO thumbnails (id, itemID, bytes) VALUES ('t', ?, x'00')", arguments: [item])
            }
            // The app's plain GRDB writes are captured too, as the app's.
            try await pool.write { db in
                try db.execute(sql: "UPDATE items SET done = 1 WHERE id = ?", arguments: [item])
                try db.execute(sql: "UPDATE lists SET collapsed = 1 WHERE id = ?", arguments: [list.uuidString])
            }
            try await store.write(author: StratusStore.importAuthor) { db in
                try db.execute(sql: "UPDATE lists SET title = 'Food' WHERE id = ?", arguments: [list.uuidString])
            }
            // Delete, then insert the same UUID again: both are in the history, in order.
            try await store.write { db in
                try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [item])
                try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'Oat milk')", arguments: [item])
            }
            await #expect(throws: (any Error).self) {
                try await store.write { db in
                    try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [UUID().uuidString])
                    throw CancellationError()
                }
            }

            let all = try await store.history()
            #expect(all.transactions.map(\.author) == ["app", "app", "import", "app"])
            #expect(all.transactions[0].changes.map(\.operation) == [.insert, .insert], "thumbnails are local-only")
            #expect(all.transactions[0].changes.map(\.rowID) == [list, item], "TEXT and BLOB UUID keys both read back")
            #expect(all.transactions[1].changes.map(\.table) == ["items"], "collapsed is a local column of lists")
            #expect(all.transactions[1].changes.map(\.operation) == [.update])
            #expect(all.transactions[3].changes.map(\.operation) == [.delete, .insert])
            #expect(all.transactions.map(\.token.transaction) == [1, 2, 3, 4], "the rolled-back transaction took no number")

            let others = try await store.history(excludingAuthors: [StratusStore.appAuthor])
            #expect(others.transactions.map(\.author) == ["import"])
            #expect(others.token == all.token, "excluded transactions are passed over, not re-read")
            let paged = try await store.history(after: all.transactions[1].token, limit: 1)
            #expect(paged.transactions.map(\.token.transaction) == [3])
        }
    }

    @Test("a transaction's first change inside a rolled-back savepoint, and a statement that skips its row, leave the history right")
    func captureEdges() async throws {
        try await Self.withDirectory { directory in
            let pool = try Self.makePool(directory)
            let store = try await StratusStore.open(pool, model: Self.model)
            let (first, second, third) = (UUID(), UUID(), UUID())
            try await store.write { db in
                try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'A')", arguments: [first.uuidString])
            }
            // The savepoint took the transaction's row with its change; the next change adds it again.
            try await store.write { db in
                try db.inSavepoint {
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'B')", arguments: [second.uuidString])
                    return .rollback
                }
                try db.execute(sql: "UPDATE lists SET title = 'A2' WHERE id = ?", arguments: [first.uuidString])
            }
            // A statement that skips its row on a conflict changes nothing, alone in its transaction or not.
            try await store.write { db in
                try db.execute(sql: "INSERT OR IGNORE INTO lists (id, title) VALUES (?, 'dup')", arguments: [first.uuidString])
            }
            try await store.write { db in
                try db.execute(sql: "INSERT OR IGNORE INTO lists (id, title) VALUES (?, 'dup')", arguments: [first.uuidString])
                try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'C')", arguments: [third.uuidString])
            }
            let history = try await store.history()
            #expect(history.transactions.map { $0.changes.map(\.rowID) } == [[first], [first], [third]])
            #expect(history.transactions.map { $0.changes.map(\.operation) } == [[.insert], [.update], [.insert]])
            #expect(try await store.pendingChanges().map(\.rowID).sorted { $0.uuidString < $1.uuidString }
                == [first, third].sorted { $0.uuidString < $1.uuidString })
        }
    }

    @Test("history tokens survive reopening the file, and numbering goes on after them")
    func tokensSurviveRestarts() async throws {
        try await Self.withDirectory { directory in
            let token: HistoryToken
            do {
                let store = try await StratusStore.open(try Self.makePool(directory), model: Self.model)
                try await store.write { db in
                    try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [UUID().uuidString])
                }
                token = try await store.history().token
            }
            let encoded = try JSONEncoder().encode(token)
            let store = try await StratusStore.open(try Self.makePool(directory), model: Self.model)
            try await store.write(author: "sync") { db in
                try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [UUID().uuidString])
            }
            let after = try await store.history(after: try JSONDecoder().decode(HistoryToken.self, from: encoded))
            #expect(after.transactions.map(\.author) == ["sync"])
            #expect(after.transactions.first?.token.transaction == token.transaction + 1)
        }
    }

    @Test("a pool the store has not opened cannot write to a synced table: no write escapes capture")
    func unopenedPoolRefused() async throws {
        try await Self.withDirectory { directory in
            _ = try await StratusStore.open(try Self.makePool(directory), model: Self.model)
            let other = try DatabasePool(path: directory.appendingPathComponent("app.sqlite").path)
            await #expect(throws: (any Error).self) {
                try await other.write { db in try db.execute(sql: "INSERT INTO lists (id) VALUES ('x')") }
            }
            try await other.write { db in try db.execute(sql: "INSERT INTO thumbnails (id, itemID, bytes) VALUES ('t', x'00', x'00')") }
        }
    }

    @Test("the writer gets a 16 MiB page cache for imports, and keeps a larger one the app chose")
    func writerPageCache() async throws {
        try await Self.withDirectory { directory in
            let pool = try Self.makePool(directory)
            _ = try await StratusStore.open(pool, model: Self.model)
            #expect(try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == -16384)
        }
        try await Self.withDirectory { directory in
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = -65536") }
            let pool = try DatabasePool(path: directory.appendingPathComponent("app.sqlite").path, configuration: configuration)
            try await pool.write { db in try db.execute(sql: "CREATE TABLE lists (id TEXT PRIMARY KEY NOT NULL, title TEXT)") }
            _ = try await StratusStore.open(pool, model: StoreModel([.synced("lists", recordType: "List")]))
            #expect(try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == -65536)
        }
    }

    @Test("WAL checkpoints move off the writer: its commits never copy the WAL, which stays bounded; an app's 'off' is kept")
    func backgroundCheckpoints() async throws {
        try await Self.withDirectory { directory in
            let path = directory.appendingPathComponent("app.sqlite").path
            let pool = try await Self.listsPool(path, autocheckpoint: 100)
            let store = try await StratusStore.open(pool, model: StoreModel([.synced("lists", recordType: "List")]))
            // SQLite reports 0 once its own checkpoint is no longer the writer's commit hook.
            #expect(try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") } == 0)
            let databaseBefore = try Self.fileSize(path)
            // About 600 pages of 4 KiB in 30 commits: six times the threshold, well under the point
            // where the writer would checkpoint in its commit itself.
            try await Self.writeLargeLists(store, transactions: 30, rows: 20)
            // Only a checkpoint moves pages into the database file; this one ran on another thread.
            try await Self.waitUntil { try Self.fileSize(path) > databaseBefore + 1_000_000 }
            // The WAL is restarted after each complete checkpoint instead of growing with every write.
            #expect(try Self.fileSize(path + "-wal") < 16 * 100 * 4096)
            #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM lists") } == 600)
        }
        try await Self.withDirectory { directory in
            let path = directory.appendingPathComponent("app.sqlite").path
            let store = try await StratusStore.open(
                try await Self.listsPool(path, autocheckpoint: 0), model: StoreModel([.synced("lists", recordType: "List")]))
            let databaseBefore = try Self.fileSize(path)
            try await Self.writeLargeLists(store, transactions: 10, rows: 20)
            // The app checkpoints when it chooses: nothing moved the WAL's pages.
            #expect(try Self.fileSize(path) == databaseBefore)
            #expect(try Self.fileSize(path + "-wal") > 200 * 3_000)
        }
    }

    /// A file at `path` with a `lists` table, whose connections checkpoint at `autocheckpoint` pages.
    static func listsPool(_ path: String, autocheckpoint: Int) async throws -> DatabasePool {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = \(autocheckpoint)") }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try await pool.write { db in try db.execute(sql: "CREATE TABLE lists (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL DEFAULT '')") }
        return pool
    }

    /// Writes `transactions` transactions of `rows` lists, each with a title of 3,000 bytes.
    static func writeLargeLists(_ store: StratusStore, transactions: Int, rows: Int) async throws {
        for _ in 0..<transactions {
            try await store.write { db in
                for _ in 0..<rows {
                    try db.execute(
                        sql: "INSERT INTO lists (id, title) VALUES (?, ?)",
                        arguments: [UUID().uuidString, String(repeating: "x", count: 3_000)])
                }
            }
        }
    }

    static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    /// Waits, bounded at 30 s, for work on another thread to show.
    static func waitUntil(_ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("one store per pool: a second open is refused while the first store lives, and allowed once it is gone")
    func oneStorePerPool() async throws {
        try await Self.withDirectory { directory in
            let pool = try Self.makePool(directory)
            var first: StratusStore? = try await StratusStore.open(pool, model: Self.model)
            let refused = await #expect(throws: CloudError.self) { try await StratusStore.open(pool, model: Self.model) }
            #expect(refused?.code == .invalidArguments)
            try await first?.write { db in try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [UUID().uuidString]) }
            #expect(try await first?.pendingChanges().count == 1)
            first = nil
            let second = try await StratusStore.open(pool, model: Self.model)
            try await second.write { db in try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [UUID().uuidString]) }
            #expect(try await second.pendingChanges().count == 2)
        }
    }
}

/// The mapping of rows to records and back, on a real file.
@Suite("StratusStore: rows as records")
struct RecordMappingTests {
    @Test("a row becomes a record of its type in the store's zone and comes back the same; large BLOBs go as assets, relationships as record names")
    func roundTrip() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let store = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            let mapping = RecordMapping(assetThreshold: 1_000, assetDirectory: directory.appendingPathComponent("assets"))
            let list = UUID(), item = UUID()
            let large = Data((0..<5_000).map { UInt8($0 % 251) })
            try await store.write { db in
                try db.execute(
                    sql: "INSERT INTO lists (id, title, collapsed) VALUES (?, 'Groceries', 1)", arguments: [list.uuidString])
                try db.execute(
                    sql: "INSERT INTO items (id, listID, title, done, attachment) VALUES (?, ?, 'Milk', 1, ?)",
                    arguments: [item, list.uuidString, large])
            }
            let items = try #require(StoreFoundationTests.model.table(named: "items"))
            let lists = try #require(StoreFoundationTests.model.table(named: "lists"))
            let record = try #require(try await pool.read { db in try mapping.record(of: items, rowID: item, in: db) })
            #expect(record.recordType == "Item")
            #expect(record.recordID == RecordMapping.recordID(item))
            #expect(record.recordID.zoneID.zoneName == "com.stratus.store")
            #expect(record.fieldValue(forKey: "title") == .string("Milk"))
            #expect(record.fieldValue(forKey: "done") == .int64(1))
            #expect(record.fieldValue(forKey: "listID") == .string(list.uuidString), "a relationship is the related record's name")
            guard case .asset(let asset)? = record.fieldValue(forKey: "attachment_ckAsset"), record.fieldValue(forKey: "attachment") == nil else {
                Issue.record("a BLOB over the threshold goes as an asset")
                return
            }
            #expect(try Data(contentsOf: try #require(asset.fileURL)) == large)
            let listRecord = try #require(try await pool.read { db in try mapping.record(of: lists, rowID: list, in: db) })
            #expect(listRecord.allKeys() == ["title"], "the key and local columns are not fields")

            // Back: into an empty copy of the tables (as another device), then compare the rows.
            let other = directory.appendingPathComponent("other")
            try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
            let otherPool = try StoreFoundationTests.makePool(other)
            let otherStore = try await StratusStore.open(otherPool, model: StoreFoundationTests.model)
            var editing = record
            editing.setFieldValue(nil, forKey: "done")
            let edited = editing
            try await otherStore.write(author: StratusStore.importAuthor) { db in
                try mapping.apply(listRecord, to: lists, in: db)
                try mapping.apply(edited, to: items, in: db)
            }
            let row = try otherPool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM items") }
            #expect(row?["id"] == item)
            #expect(row?["listID"] == list.uuidString, "the column's own UUID form (TEXT here)")
            #expect(row?["title"] == "Milk")
            #expect((row?["done"] as DatabaseValue?) == .null, "an absent field is NULL")
            #expect(row?["attachment"] == large)
            #expect(try await otherPool.read { db in try Int.fetchOne(db, sql: "SELECT collapsed FROM lists") } == 0,
                    "local columns keep their own value")
            let history = try await otherStore.history()
            #expect(history.transactions.map(\.author) == ["import"])
        }
    }

    @Test("a synced column whose name cannot be a field is refused")
    func fieldNames() async throws {
        let messages = try await StoreFoundationTests.refusal(
            #"CREATE TABLE tags (id TEXT PRIMARY KEY NOT NULL, "2nd" TEXT, "with space" TEXT);"#,
            StoreModel(StoreFoundationTests.model.tables + [.synced("tags")]))
        #expect(messages.count == 2 && messages.allSatisfy { $0.contains("its name must be a letter") }, "\(messages)")
    }
}

/// The outbox: what the server has yet to confirm, kept in the app's own transactions.
@Suite("StratusStore: the outbox")
struct OutboxTests {
    @Test("one entry per row, the last change winning; imports and local columns stay out; a stale confirmation leaves a newer change")
    func coalescing() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let store = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            let list = UUID(), gone = UUID(), reborn = UUID(), imported = UUID()
            try await store.write { db in
                for id in [list, gone, reborn] {
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'a')", arguments: [id.uuidString])
                }
                try db.execute(sql: "UPDATE lists SET title = 'b' WHERE id = ?", arguments: [list.uuidString])
                try db.execute(sql: "DELETE FROM lists WHERE id = ?", arguments: [gone.uuidString])
            }
            try await store.write { db in
                // Deleted, then inserted again under the same UUID: the new row is what is sent.
                try db.execute(sql: "DELETE FROM lists WHERE id = ?", arguments: [reborn.uuidString])
                try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'again')", arguments: [reborn.uuidString])
            }
            try await store.write(author: StratusStore.importAuthor) { db in
                try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'from the server')", arguments: [imported.uuidString])
            }
            let pending = try await store.pendingChanges()
            let byRow = Dictionary(uniqueKeysWithValues: pending.map { ($0.rowID, $0) })
            #expect(pending.count == 3)
            #expect(byRow[list]?.operation == .save)
            #expect(byRow[gone]?.operation == .delete)
            #expect(byRow[reborn]?.operation == .save, "delete then reinsert keeps the new row")
            #expect(byRow[imported] == nil, "what came from the server is not sent back")

            // A local column alone is no change to send.
            try await store.write { db in
                try db.execute(sql: "UPDATE lists SET collapsed = 1 WHERE id = ?", arguments: [imported.uuidString])
            }
            #expect(try await store.pendingChanges().count == 3)

            // The server confirms the version it was sent; the row changed meanwhile, so its entry stays.
            let sent = try #require(byRow[list])
            try await store.write { db in
                try db.execute(sql: "UPDATE lists SET title = 'c' WHERE id = ?", arguments: [list.uuidString])
            }
            try await store.confirm([sent, try #require(byRow[gone])])
            let left = try await store.pendingChanges()
            #expect(Set(left.map(\.rowID)) == [list, reborn])
            #expect(try #require(left.first { $0.rowID == list }).version > sent.version)
            try await store.confirm(left)
            #expect(try await store.pendingChanges().isEmpty, "everything local is confirmed")
        }
    }

    @Test("the outbox survives reopening, as the write it came with does")
    func survivesReopening() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let item = UUID()
            do {
                let store = try await StratusStore.open(try StoreFoundationTests.makePool(directory), model: StoreFoundationTests.model)
                try await store.write { db in
                    try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'x')", arguments: [item])
                }
            }
            let store = try await StratusStore.open(try StoreFoundationTests.makePool(directory), model: StoreFoundationTests.model)
            let pending = try await store.pendingChanges()
            #expect(pending.map(\.rowID) == [item] && pending.first?.table == "items")
            try await store.confirm(pending)
            #expect(try await store.pendingChanges().isEmpty, "a BLOB key is confirmed as well as a TEXT one")
        }
    }
}

/// What a careful app does that the first version of the capture got wrong.
@Suite("StratusStore: keys, defaults and whole-row updates")
struct StoreEdgeTests {
    @Test("keys stored in lower case are found; a missing field leaves a NOT NULL column with a default alone; a whole-row update of local columns is no change")
    func edges() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let store = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            let mapping = RecordMapping(assetDirectory: directory.appendingPathComponent("assets"))
            let lists = try #require(StoreFoundationTests.model.table(named: "lists"))
            let list = UUID()
            try await store.write { db in
                try db.execute(
                    sql: "INSERT INTO lists (id, title) VALUES (?, 'lower')", arguments: [list.uuidString.lowercased()])
            }
            let record = try #require(try await pool.read { db in try mapping.record(of: lists, rowID: list, in: db) })
            #expect(record.fieldValue(forKey: "title") == .string("lower"))
            // A record without `title` (NOT NULL DEFAULT ''): the row keeps its title, and no second row appears.
            var bare = record
            bare.setFieldValue(nil, forKey: "title")
            let untitled = bare
            try await store.write(author: StratusStore.importAuthor) { db in try mapping.apply(untitled, to: lists, in: db) }
            let rows = try await pool.read { db in try String.fetchAll(db, sql: "SELECT title FROM lists") }
            #expect(rows == ["lower"])
            // A new row from such a record takes the default.
            let fresh = Stratus.Record(recordType: "List", recordID: RecordMapping.recordID(UUID()))
            try await store.write(author: StratusStore.importAuthor) { db in try mapping.apply(fresh, to: lists, in: db) }
            #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM lists WHERE title = ''") } == 1)

            // Rewriting every column with only `collapsed` changed (as a record's update() does) is no change.
            let pendingBefore = try await store.pendingChanges()
            let historyBefore = try await store.history().transactions.count
            try await store.write { db in
                try db.execute(
                    sql: "UPDATE lists SET id = id, title = title, collapsed = 1 WHERE id = ?",
                    arguments: [list.uuidString.lowercased()])
            }
            #expect(try await store.pendingChanges() == pendingBefore)
            #expect(try await store.history().transactions.count == historyBefore)
            try await store.confirm(pendingBefore)
            #expect(try await store.pendingChanges().isEmpty, "a lower-case key is confirmed as stored")
        }
    }
}
