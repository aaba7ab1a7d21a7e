import Foundation
import GRDB
import Stratus
@testable import StratusStore
import Testing

/// The mirror's own tables: the ancestor's encoding, and files written by earlier versions.
@Suite("StratusStore: metadata")
struct StoreMetadataTests {
    @Test("an ancestor comes back from its encoding value for value, each SQLite type kept; NULLs are left out; a malformed one is refused")
    func ancestorEncoding() throws {
        let values: [String: DatabaseValue] = [
            "count": 42.databaseValue, "negative": (-7 as Int64).databaseValue, "ratio": 2.0.databaseValue,
            "pi": Double.pi.databaseValue, "title": "Café ☕️".databaseValue, "empty": "".databaseValue,
            "bytes": Data([0, 1, 255]).databaseValue, "none": .null,
        ]
        let decoded = try AncestorEncoding.decode(AncestorEncoding.encode(values))
        var expected = values
        expected["none"] = nil
        #expect(decoded == expected)
        #expect(decoded["ratio"]?.storage == .double(2.0), "a whole REAL stays REAL")
        #expect(try AncestorEncoding.decode(Data()) == [:])
        #expect(throws: AncestorEncoding.Malformed.self) { try AncestorEncoding.decode(Data([0, 1, 0x61, 9])) }
        #expect(throws: AncestorEncoding.Malformed.self) { try AncestorEncoding.decode(Data([0, 5, 0x61])) }
    }

    @Test("an ancestor keeps a large BLOB by its SHA-256, not a second copy: resolved against the side that still holds it, it is that value again; against none, a marker equal to nothing, or dropped")
    func largeBlobsByDigest() throws {
        let photo = Data((0..<50_000).map { UInt8($0 % 251) })
        let small = Data(repeating: 7, count: AncestorEncoding.digestedBlobBytes)
        let values: [String: DatabaseValue] = ["photo": photo.databaseValue, "thumb": small.databaseValue, "title": "Milk".databaseValue]
        let encoded = AncestorEncoding.encode(values)
        #expect(encoded.count < small.count + 100, "the 50,000-byte BLOB is 32 bytes here: \(encoded.count)")
        let decoded = try AncestorEncoding.decode(encoded)
        #expect(decoded["thumb"] == small.databaseValue && decoded["title"] == "Milk".databaseValue, "small values are kept whole")
        #expect(decoded["photo"] != photo.databaseValue, "a marker equals no real value")
        #expect(AncestorEncoding.holdsDigests(decoded))
        let edited = Data(photo.reversed()).databaseValue
        let resolved = AncestorEncoding.resolved(decoded, against: [["photo": edited], ["photo": photo.databaseValue]])
        #expect(resolved == values, "the side that still holds it gives the bytes back")
        let unresolved = AncestorEncoding.resolved(decoded, against: [["photo": edited]])
        #expect(unresolved["photo"] != edited && AncestorEncoding.holdsDigests(unresolved), "changed on every side: still unequal to each")
        #expect(AncestorEncoding.resolved(decoded, against: [["photo": edited]], droppingUnresolved: true)["photo"] == nil)
        let whole = try AncestorEncoding.decode(AncestorEncoding.encode(values, digestingLargeBlobs: false))
        #expect(whole == values, "values to write back into a row keep every byte")
    }

    @Test("a file of the earliest layout (records keyed without row IDs, ancestors one row per column) is migrated once, values and tags intact")
    func ancestorsMigrate() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try DatabasePool(path: directory.appendingPathComponent("old.sqlite").path)
            let rowID = UUID()
            let record = Stratus.Record(recordType: "Item", recordID: RecordMapping.recordID(rowID))
            try await pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE stratusstore_records (
                            table_name TEXT NOT NULL, row_id TEXT NOT NULL, system_fields BLOB NOT NULL, change_tag TEXT,
                            PRIMARY KEY (table_name, row_id)) WITHOUT ROWID;
                        CREATE TABLE stratusstore_ancestors (
                            table_name TEXT NOT NULL, row_id TEXT NOT NULL, column_name TEXT NOT NULL, value,
                            PRIMARY KEY (table_name, row_id, column_name)) WITHOUT ROWID;
                        """)
                try db.execute(
                    sql: "INSERT INTO stratusstore_records VALUES ('items', ?, ?, 'tag')",
                    arguments: [rowID.uuidString, record.encodeSystemFields()])
                for (column, value) in [("title", "Milk".databaseValue), ("done", 1.databaseValue)] {
                    try db.execute(
                        sql: "INSERT INTO stratusstore_ancestors VALUES ('items', ?, ?, ?)", arguments: [rowID.uuidString, column, value])
                }
            }
            try await pool.write { db in
                try StoreMetadata.create(in: db)
                try StoreMetadata.create(in: db)
            }
            let known = try await pool.read { db in try StoreMetadata.serverRecord(table: "items", rowID: rowID, in: db) }
            #expect(known?.values == ["title": "Milk".databaseValue, "done": 1.databaseValue])
            #expect(try await pool.read { db in try StoreMetadata.changeTag(table: "items", rowID: rowID, in: db) } == "tag")
            let layout = try await pool.read { db in
                (try db.tableExists("stratusstore_ancestors"),
                 try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'stratusstore_records'") ?? "")
            }
            #expect(layout.0 == false)
            #expect(!layout.1.contains("WITHOUT ROWID") && layout.1.contains("id INTEGER PRIMARY KEY"))
        }
    }

    @Test("a batch's change tags come in one read: each known row's tag, none for a row without a record or of another table; one tag per row however often it is asked")
    func changeTagsOfABatch() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let (tagged, other, unknown) = (UUID(), UUID(), UUID())
            try await pool.write { db in
                try StoreMetadata.create(in: db)
                for (rowID, table, tag) in [(tagged, "items", "t1"), (other, "lists", "t2")] {
                    try db.execute(
                        sql: "INSERT INTO stratusstore_records (table_name, row_id, system_fields, change_tag) VALUES (?, ?, x'', ?)",
                        arguments: [table, rowID.uuidString, tag])
                }
            }
            let tags = try await pool.read { db in
                try StoreMetadata.changeTags(table: "items", rowIDs: [tagged, other, unknown, tagged], in: db)
            }
            #expect(tags == [tagged: "t1"])
            #expect(try await pool.read { db in try StoreMetadata.changeTags(table: "items", rowIDs: [], in: db) }.isEmpty)
        }
    }

    @Test("a fetched batch's keys are found as stored, in each of a UUID's forms, across statements of the batch")
    func keysOfABatch() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let rowIDs = (0..<(2 * StoreColumns.keysProbedTogether + 50)).map { _ in UUID() }
            // Every third row ID has no row; the others are stored as 16 bytes, or their text in upper or lower case.
            let expected = Dictionary(
                uniqueKeysWithValues: rowIDs.enumerated().filter { !$0.offset.isMultiple(of: 3) }.map { index, rowID in
                    (rowID, [rowID.databaseValue, rowID.upperText.databaseValue, rowID.lowerText.databaseValue][index % 3])
                })
            for table in ["lists", "items"] {
                let storedTable = try #require(StoreFoundationTests.model.table(named: table))
                try await pool.write { db in
                    for key in expected.values {
                        try db.execute(sql: "INSERT INTO \(table) (id) VALUES (?)", arguments: [key])
                    }
                    let columns = try StoreColumns(storedTable, in: db)
                    #expect(try columns.storedKeys(of: rowIDs, in: db) == expected, "table \(table)")
                    #expect(try columns.storedKeys(of: [], in: db).isEmpty)
                    for rowID in rowIDs.prefix(6) {
                        #expect(try columns.storedKey(of: rowID, in: db) == expected[rowID], "one by one, as in a batch")
                    }
                }
            }
        }
    }

    @Test("a batch to send reads its outbox entries, rows and server records together, as one by one: keys in each form, entries folded or not, a key stored in another form than its entry says, rows gone left out")
    func sendBatchReads() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            _ = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            let table = try #require(StoreFoundationTests.model.table(named: "items"))
            let mapping = RecordMapping(assetDirectory: directory.appendingPathComponent("assets"))
            let rowIDs = (0..<(2 * StoreColumns.keysProbedTogether + 30)).map { _ in UUID() }
            // Keys in each of the three forms, in turn.
            let keys = rowIDs.enumerated().map { index, rowID in
                [rowID.databaseValue, rowID.upperText.databaseValue, rowID.lowerText.databaseValue][index % 3]
            }
            try await pool.write { db in
                // The first half's changes are folded into the outbox, the second half's are not.
                for index in rowIDs.indices {
                    if index == rowIDs.count / 2 { try StoreMetadata.fold(in: db) }
                    try db.execute(
                        sql: "INSERT INTO items (id, title, done) VALUES (?, ?, ?)", arguments: [keys[index], "item \(index)", index % 2])
                }
                // Every fifth row has a server record; every seventh row is gone again.
                for index in rowIDs.indices where index.isMultiple(of: 5) {
                    var record = Stratus.Record(recordType: "Item", recordID: RecordMapping.recordID(rowIDs[index]))
                    record["title"] = "server \(index)"
                    try StoreMetadata.setServerRecord(
                        record, values: ["title": "server \(index)".databaseValue], table: "items", rowID: rowIDs[index], in: db)
                }
                for index in rowIDs.indices where index.isMultiple(of: 7) {
                    try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [keys[index]])
                }
            }
            let asked = rowIDs + [UUID()]
            try await pool.read { db in
                let entries = try StoreMetadata.outboxEntries(rowIDs: asked, in: db)
                var oneByOne: [UUID: PendingChange] = [:]
                for rowID in asked { oneByOne[rowID] = try StoreMetadata.outboxEntry(rowID: rowID, in: db) }
                #expect(entries == oneByOne)
                #expect(entries.count == rowIDs.count)

                let servers = try StoreMetadata.serverRecords(table: "items", rowIDs: asked, in: db)
                #expect(Set(servers.keys) == Set(rowIDs.indices.filter { $0.isMultiple(of: 5) }.map { rowIDs[$0] }))
                for rowID in asked {
                    let one = try StoreMetadata.serverRecord(table: "items", rowID: rowID, in: db)
                    #expect(servers[rowID]?.systemFields == one?.systemFields && servers[rowID]?.values == one?.values)
                }
                #expect(try StoreMetadata.serverRecords(table: "lists", rowIDs: asked, in: db).isEmpty)

                let columns = try StoreColumns(table, in: db)
                var storedKeys = entries.mapValues(\.storedKey)
                // The entry of the fourth row says its key is text; the row holds 16 bytes.
                storedKeys[rowIDs[3]] = rowIDs[3].upperText.databaseValue
                let values = try mapping.columnValues(ofRows: asked, storedKeys: storedKeys, columns: columns, in: db)
                var expected: [UUID: [String: DatabaseValue]] = [:]
                for rowID in asked { expected[rowID] = try mapping.columnValues(of: table, rowID: rowID, columns: columns, in: db) }
                #expect(values == expected)
                #expect(values.count == rowIDs.indices.filter { !$0.isMultiple(of: 7) }.count)
                #expect(values[rowIDs[3]]?["title"] == "item 3".databaseValue)
            }
        }
    }

    @Test("an outbox and a change log of the earlier layouts are rebuilt, their entries and history kept, and folding starts after their changes")
    func outboxMigrates() async throws {
        try await StoreFoundationTests.withDirectory { directory in
            let pool = try StoreFoundationTests.makePool(directory)
            let rowID = UUID()
            try await pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE stratusstore_transactions (id INTEGER PRIMARY KEY, author TEXT NOT NULL, time_ms INTEGER NOT NULL);
                        CREATE TABLE stratusstore_changes (
                            seq INTEGER PRIMARY KEY AUTOINCREMENT, transaction_id INTEGER NOT NULL,
                            table_name TEXT NOT NULL, row_id NOT NULL, operation TEXT NOT NULL);
                        CREATE TABLE stratusstore_outbox (
                            table_name TEXT NOT NULL, row_id NOT NULL, operation TEXT NOT NULL,
                            version INTEGER NOT NULL, PRIMARY KEY (table_name, row_id));
                        INSERT INTO stratusstore_transactions VALUES (1, 'app', 0);
                        """)
                try db.execute(
                    sql: "INSERT INTO stratusstore_changes (transaction_id, table_name, row_id, operation) VALUES (1, 'lists', ?, 'insert')",
                    arguments: [rowID.uuidString])
                try db.execute(
                    sql: "INSERT INTO stratusstore_outbox VALUES ('lists', ?, 'save', 1)", arguments: [rowID.uuidString])
            }
            let store = try await StratusStore.open(pool, model: StoreFoundationTests.model)
            #expect(try await store.pendingChanges().map(\.rowID) == [rowID])
            let layout = try await pool.read { db in
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'stratusstore_outbox'")
            }
            #expect(layout?.contains("PRIMARY KEY (row_id, table_name)") == true)
            let next = UUID()
            try await store.write { db in try db.execute(sql: "INSERT INTO lists (id) VALUES (?)", arguments: [next.uuidString]) }
            #expect(try await store.pendingChanges().map(\.rowID) == [rowID, next])
            let log = try await pool.read { db in
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'stratusstore_changes'")
            }
            #expect(log?.contains("AUTOINCREMENT") == false)
            let history = try await store.history()
            #expect(history.transactions.map { $0.changes.map(\.rowID) } == [[rowID], [next]])
        }
    }

    @Test("a UUID's text is Foundation's in both cases, and what reads back is exactly a UUID's text")
    func uuidText() {
        for _ in 0..<1_000 {
            let id = UUID()
            #expect(id.upperText == id.uuidString)
            #expect(id.lowerText == id.uuidString.lowercased())
            #expect(UUID(text: id.upperText) == id)
            #expect(UUID(text: id.lowerText) == id)
        }
        let valid = "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
        var candidates = [valid, "e621e1f8-C36C-495a-93FC-0c247a3e6e5f", "", String(valid.dropLast()), valid + "0",
            valid.replacingOccurrences(of: "-", with: ""), valid.replacingOccurrences(of: "-", with: "_"),
            "E621E1F8C-36C-495A-93FC-0C247A3E6E5F", "G621E1F8-C36C-495A-93FC-0C247A3E6E5F", "E621E1F8-C36C-495A-93FC-0C247A3E6E5 "]
        // Every character replaced by each of a few neighbours of the digits' ranges.
        for index in valid.indices {
            for replacement in ["/", ":", "@", "G", "`", "g", "-"] {
                candidates.append(valid.replacingCharacters(in: index...index, with: replacement))
            }
        }
        for text in candidates {
            // Foundation's parser on Linux also takes a dash or a two-byte character for digits of
            // its own; the text read is exactly a UUID's own text, in either case.
            let foundations = UUID(uuidString: text).flatMap { $0.uuidString == text.uppercased() ? $0 : nil }
            #expect(UUID(text: text) == foundations, "\(text)")
        }
        #expect(UUID(text: "E621E1F8-C36C-495A-93FC-0C247A3E6E5é") == nil)
    }
}
