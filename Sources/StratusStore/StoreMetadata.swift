import Crypto
import Foundation
import GRDB
import Stratus

/// What the mirror keeps beside the app's tables, in its own (`stratusstore_`) tables:
///
/// - `stratusstore_records`: per mirrored row, the system fields of the server's record as this
///   device last fetched or saved it (its change tag bases the next save), that change tag apart,
///   so that a fetched record this device already holds is recognised without decoding, and that
///   record's values as SQLite holds them, encoded in one value (``AncestorEncoding``): the common
///   ancestor a merge compares both sides with;
/// - `stratusstore_row_zones`: the zone of each row that lives elsewhere than the store's own zone
///   (a share's zone; in a store of the shared database, every row's), with its table;
/// - `stratusstore_moved`: records of rows moved into a share's zone, still to delete from the
///   zone they left;
/// - `stratusstore_shares`: what the signed-in user may do in each shared zone, from its share;
/// - `stratusstore_refused`: the local changes the server refused for good and the store undid,
///   with why, until the app dismisses them;
/// - `stratusstore_parked`: the unsent rows of users who signed out on this device
///   (``StoreParking``);
/// - `stratusstore_mirror`: the sync engine's state and whether the store's zone exists.
enum StoreMetadata {
    static func create(in db: GRDB.Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS stratusstore_mirror (key TEXT PRIMARY KEY NOT NULL, value);
                CREATE TABLE IF NOT EXISTS stratusstore_row_zones (
                    row_id TEXT PRIMARY KEY NOT NULL, table_name TEXT NOT NULL, zone_name TEXT NOT NULL,
                    owner_name TEXT NOT NULL) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS stratusstore_row_zones_by_zone ON stratusstore_row_zones (zone_name, owner_name);
                CREATE TABLE IF NOT EXISTS stratusstore_moved (
                    record_name TEXT NOT NULL, zone_name TEXT NOT NULL, owner_name TEXT NOT NULL,
                    PRIMARY KEY (record_name, zone_name, owner_name)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS stratusstore_shares (
                    zone_name TEXT NOT NULL, owner_name TEXT NOT NULL, permission TEXT NOT NULL,
                    PRIMARY KEY (zone_name, owner_name)) WITHOUT ROWID;
                """)
        try createServerRecords(in: db)
        try migrateAncestors(in: db)
    }

    /// The server's records, one row per mirrored row, in a table of row IDs with a separate index
    /// by key. A record is about 400 bytes (system fields and ancestor). Earlier versions kept them
    /// in a `WITHOUT ROWID` table keyed by the row's random UUID, whose interior pages hold whole
    /// records, about ten to a page, so every lookup descended a deep tree of them. Here records
    /// are appended in the order the store learns them, and lookups descend an index of keys alone
    /// (about 50 bytes each). In a micro-test of 100,000 lookups and upserts of such records in
    /// transactions of 1,000, this layout took 1.9 s against 4.5 s. A table of the earlier layout
    /// is rebuilt in this one.
    private static func createServerRecords(in db: GRDB.Database) throws {
        let definition = """
            CREATE TABLE stratusstore_records (
                id INTEGER PRIMARY KEY, table_name TEXT NOT NULL, row_id TEXT NOT NULL, system_fields BLOB NOT NULL,
                change_tag TEXT, ancestor BLOB, UNIQUE (table_name, row_id))
            """
        guard let existing = try String.fetchOne(
            db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'stratusstore_records'")
        else { return try db.execute(sql: definition) }
        guard existing.contains("WITHOUT ROWID") else { return }
        // The oldest layout kept ancestors in a table of their own, which `migrateAncestors` then folds in.
        let ancestor = try db.columns(in: "stratusstore_records").contains(where: { $0.name == "ancestor" }) ? "ancestor" : "NULL"
        try db.execute(sql: "ALTER TABLE stratusstore_records RENAME TO stratusstore_records_earlier")
        try db.execute(sql: definition)
        try db.execute(
            sql: """
                INSERT INTO stratusstore_records (table_name, row_id, system_fields, change_tag, ancestor)
                SELECT table_name, row_id, system_fields, change_tag, \(ancestor) FROM stratusstore_records_earlier;
                DROP TABLE stratusstore_records_earlier;
                """)
    }

    /// Moves the ancestors a file keeps in the table of earlier versions (one row per column) into
    /// the records' `ancestor` values, once.
    private static func migrateAncestors(in db: GRDB.Database) throws {
        guard try db.tableExists("stratusstore_ancestors") else { return }
        var ancestors: [[String]: [String: DatabaseValue]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT table_name, row_id, column_name, value FROM stratusstore_ancestors") {
            ancestors[[row["table_name"], row["row_id"]], default: [:]][row["column_name"]] = row["value"]
        }
        for (key, values) in ancestors {
            try db.execute(
                sql: "UPDATE stratusstore_records SET ancestor = ? WHERE table_name = ? AND row_id = ?",
                arguments: [AncestorEncoding.encode(values), key[0], key[1]])
        }
        try db.execute(sql: "DROP TABLE stratusstore_ancestors")
    }

    // MARK: The server's last record of a row

    /// The server's record of a row as last known: its system fields and values.
    struct ServerRecord {
        var systemFields: Data
        var values: [String: DatabaseValue]

        /// The record of a row holding `system_fields` and `ancestor`.
        fileprivate init(row: Row) throws {
            let ancestor: Data? = row["ancestor"]
            systemFields = row["system_fields"]
            values = try ancestor.map(AncestorEncoding.decode) ?? [:]
        }
    }

    static func serverRecord(table: String, rowID: UUID, in db: GRDB.Database) throws -> ServerRecord? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT system_fields, ancestor FROM stratusstore_records WHERE table_name = ? AND row_id = ?"),
            arguments: [table, rowID.upperText]
        ).map(ServerRecord.init(row:))
    }

    /// The server's records of `rowIDs` in `table` as last known, read together (a batch to send
    /// bases each save on its row's record).
    static func serverRecords(table: String, rowIDs: [UUID], in db: GRDB.Database) throws -> [UUID: ServerRecord] {
        var records: [UUID: ServerRecord] = [:]
        try forEachServerRecord(table: table, rowIDs: rowIDs, columns: "system_fields, ancestor", in: db) { rowID, row in
            records[rowID] = try ServerRecord(row: row)
        }
        return records
    }

    /// The change tag of the server's record of a row as last known.
    static func changeTag(table: String, rowID: UUID, in db: GRDB.Database) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT change_tag FROM stratusstore_records WHERE table_name = ? AND row_id = ?"),
            arguments: [table, rowID.upperText])
    }

    /// The change tags of the server's records of `rowIDs` in `table` as last known, read together
    /// (a fetched batch asks for all its rows at once).
    static func changeTags(table: String, rowIDs: [UUID], in db: GRDB.Database) throws -> [UUID: String] {
        var tags: [UUID: String] = [:]
        try forEachServerRecord(table: table, rowIDs: rowIDs, columns: "change_tag", in: db) { rowID, row in
            if let tag: String = row["change_tag"] { tags[rowID] = tag }
        }
        return tags
    }

    /// Hands `body` the `columns` of the server's record of each of `rowIDs` in `table` that has
    /// one, in one statement: a statement per row spent as much in GRDB's work around each step as
    /// in SQLite's lookup.
    private static func forEachServerRecord(
        table: String, rowIDs: [UUID], columns: String, in db: GRDB.Database, _ body: (UUID, Row) throws -> Void
    ) throws {
        guard !rowIDs.isEmpty else { return }
        let names = "[" + rowIDs.map { "\"" + $0.upperText + "\"" }.joined(separator: ",") + "]"
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT row_id, \(columns) FROM stratusstore_records
                    WHERE table_name = ? AND row_id IN (SELECT value FROM json_each(?))
                    """),
            arguments: [table, names])
        while let row = try rows.next() {
            if let rowID = UUID(text: row["row_id"]) { try body(rowID, row) }
        }
    }

    /// Remembers the server's record of a row, holding the mirrored column `values`; `nil` forgets
    /// it (the record is gone from the server).
    static func setServerRecord(
        _ record: Stratus.Record?, values: [String: DatabaseValue], table: String, rowID: UUID, in db: GRDB.Database
    ) throws {
        let arguments: StatementArguments = [table, rowID.upperText]
        guard let record else {
            try db.cachedStatement(
                sql: "DELETE FROM stratusstore_records WHERE table_name = ? AND row_id = ?"
            ).execute(arguments: arguments)
            return
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO stratusstore_records (table_name, row_id, system_fields, change_tag, ancestor)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (table_name, row_id) DO UPDATE SET
                    system_fields = excluded.system_fields, change_tag = excluded.change_tag, ancestor = excluded.ancestor
                """
        ).execute(arguments: arguments + [record.encodeSystemFields(), record.recordChangeTag, AncestorEncoding.encode(values)])
    }

    // MARK: The outbox

    // The outbox is `stratusstore_outbox` (one entry per row, folded in) plus the app's changes
    // after `outbox_folded` in `stratusstore_changes` (not folded yet), a later change of a row
    // superseding its entry. Every writer of the outbox folds first; readers read both.

    private static let foldedKey = "outbox_folded"
    private static let importAuthorLiteral = "'" + StratusStore.importAuthor + "'"

    /// Marks where folding starts on a file that has none: after every change it holds, whose
    /// outbox the triggers of earlier versions kept.
    static func startFolding(in db: GRDB.Database) throws {
        try db.execute(
            sql: """
                INSERT OR IGNORE INTO stratusstore_mirror (key, value)
                VALUES (?, (SELECT coalesce(max(seq), 0) FROM stratusstore_changes))
                """, arguments: [foldedKey])
    }

    private static func folded(in db: GRDB.Database) throws -> Int64 {
        try value(foldedKey, in: db).flatMap(Int64.fromDatabaseValue) ?? 0
    }

    /// Folds the app's changes since the last fold into the outbox: the last change of a row wins
    /// (a row deleted and inserted again is a save), with its sequence number as the version, which
    /// never repeats, so a confirmation of an older send never matches a newer change.
    static func fold(in db: GRDB.Database) throws {
        let folded = try folded(in: db)
        guard let last = try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(seq) FROM stratusstore_changes")),
            last > folded
        else { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO stratusstore_outbox (table_name, row_id, operation, version)
                SELECT c.table_name, c.row_id, CASE c.operation WHEN 'delete' THEN 'delete' ELSE 'save' END, c.seq
                FROM stratusstore_changes c JOIN stratusstore_transactions t ON t.id = c.transaction_id
                WHERE c.seq > ? AND t.author IS NOT \(importAuthorLiteral) ORDER BY c.seq
                ON CONFLICT (table_name, row_id) DO UPDATE SET operation = excluded.operation, version = excluded.version
                """
        ).execute(arguments: [folded])
        try setValue(last, for: foldedKey, in: db)
    }

    /// The last unfolded change of each row changed by the app after the change `seq`, as entries.
    private static func unfoldedEntries(after seq: Int64, rowID: UUID? = nil, in db: GRDB.Database) throws -> [PendingChange] {
        var sql = """
            SELECT c.table_name, c.row_id, CASE c.operation WHEN 'delete' THEN 'delete' ELSE 'save' END AS operation,
                max(c.seq) AS version
            FROM stratusstore_changes c JOIN stratusstore_transactions t ON t.id = c.transaction_id
            WHERE c.seq > ? AND t.author IS NOT \(importAuthorLiteral)
            """
        var arguments: StatementArguments = [max(seq, try folded(in: db))]
        if let rowID {
            sql += " AND c.row_id IN (?, ?, ?)"
            arguments += StatementArguments(databaseValues: StoreColumns.keyForms(rowID))
        }
        sql += " GROUP BY c.table_name, c.row_id"
        return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).compactMap(PendingChange.init(row:))
    }

    /// The outbox entry of a row, found whatever form its key is stored in (a UUID names one row
    /// of all synced tables: it is the record's name in its zone).
    static func outboxEntry(rowID: UUID, in db: GRDB.Database) throws -> PendingChange? {
        try outboxEntry(rowID: rowID, unfolded: unfoldedEntries(after: 0, rowID: rowID, in: db), rowsMayLiveElsewhere: true, in: db)
    }

    /// The outbox entries of rows, as ``outboxEntry(rowID:in:)`` finds each, with the app's changes
    /// not folded yet read once for all of them, and zones looked up only when some row was placed
    /// outside the store's own.
    static func outboxEntries(rowIDs: [UUID], in db: GRDB.Database) throws -> [UUID: PendingChange] {
        let unfolded = Dictionary(grouping: try unfoldedEntries(after: 0, in: db)) { $0.rowID }
        var entries: [UUID: PendingChange] = [:]
        // The outbox table's entries of the rows the app has not changed since the fold, read together.
        // A row whose key changed form may have an entry in each form: the newest is the row's.
        try StoreColumns.probe(rowIDs.filter { unfolded[$0] == nil }, sql: outboxProbeSQL, in: db) { row in
            guard let entry = PendingChange(row: row), entries[entry.rowID].map({ $0.version < entry.version }) ?? true
            else { return }
            entries[entry.rowID] = entry
        }
        for rowID in rowIDs {
            if let latest = unfolded[rowID]?.max(by: { $0.version < $1.version }) { entries[rowID] = latest }
        }
        return try hasRowsInOtherZones(in: db) ? entries.mapValues { try withZone($0, in: db) } : entries
    }

    private static let outboxProbeSQL = "SELECT * FROM stratusstore_outbox WHERE row_id IN \(StoreColumns.probedKeyForms)"

    /// The entry of a row: its latest change not folded yet, or else the outbox table's.
    private static func outboxEntry(
        rowID: UUID, unfolded: [PendingChange], rowsMayLiveElsewhere: Bool, in db: GRDB.Database
    ) throws -> PendingChange? {
        guard let entry = try unfolded.max(by: { $0.version < $1.version }) ?? outboxTableEntry(rowID: rowID, in: db) else {
            return nil
        }
        return rowsMayLiveElsewhere ? try withZone(entry, in: db) : entry
    }

    /// The outbox entry of a row in a write that folded the app's changes first (so that the log
    /// holds none after the fold): the outbox table alone, without reading the log, which a long
    /// import makes long with its own changes.
    static func foldedOutboxEntry(rowID: UUID, in db: GRDB.Database) throws -> PendingChange? {
        try outboxTableEntry(rowID: rowID, in: db).map { try withZone($0, in: db) }
    }

    /// The outbox table's entry of a row, its zone not looked up: the newest, when the row's key
    /// changed form (deleted and inserted again) and left an entry in each.
    private static func outboxTableEntry(rowID: UUID, in db: GRDB.Database) throws -> PendingChange? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT * FROM stratusstore_outbox WHERE row_id IN (?, ?, ?) ORDER BY version DESC LIMIT 1"),
            arguments: StatementArguments(databaseValues: StoreColumns.keyForms(rowID))
        ).flatMap(PendingChange.init(row:))
    }

    /// An entry with the zone its row lives in.
    private static func withZone(_ entry: PendingChange, in db: GRDB.Database) throws -> PendingChange {
        var entry = entry
        entry.zoneID = try zone(ofRow: entry.rowID, in: db)
        return entry
    }

    /// Whether the outbox table holds an entry: in a write that folded first, whether the outbox does.
    static func hasFoldedOutboxEntries(in db: GRDB.Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM stratusstore_outbox)")) ?? false
    }

    /// How many rows have a change the server has not confirmed.
    static func outboxCount(in db: GRDB.Database) throws -> Int {
        let unfolded = try unfoldedEntries(after: 0, in: db)
        var count = try Int.fetchOne(db, sql: "SELECT count(*) FROM stratusstore_outbox") ?? 0
        for entry in unfolded {
            let folded = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM stratusstore_outbox WHERE table_name = ? AND row_id = ?)"),
                arguments: [entry.table, entry.storedKey]) ?? false
            if !folded { count += 1 }
        }
        return count
    }

    /// The outbox entries with a version above `version`, oldest first.
    static func outbox(after version: Int64, in db: GRDB.Database) throws -> [PendingChange] {
        let unfolded = try unfoldedEntries(after: version, in: db)
        var entries: [PendingChange] = []
        if version < (try folded(in: db)) {
            // Folded entries newer than `version`, unless a change not folded yet supersedes them.
            let superseding = Set(try unfoldedEntries(after: 0, in: db).map { [$0.table.databaseValue, $0.storedKey] })
            entries = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM stratusstore_outbox WHERE version > ? ORDER BY version"),
                arguments: [version]
            ).compactMap(PendingChange.init(row:)).filter { !superseding.contains([$0.table.databaseValue, $0.storedKey]) }
        }
        entries += unfolded.sorted { $0.version < $1.version }
        // Rows are in the store's own zone unless some row was placed in another.
        guard try hasRowsInOtherZones(in: db) else { return entries }
        return try entries.map { try withZone($0, in: db) }
    }

    // The writers of the outbox below run in a write that folded the app's changes first
    // (``fold(in:)``, once: the app writes nothing inside it), so that the outbox table is the whole
    // outbox.

    /// Removes `change`'s entry if the row changed no more since that version.
    static func confirm(_ change: PendingChange, in db: GRDB.Database) throws {
        // An older entry of the row with its key in another form is settled with it: the server now
        // holds the row as it was after that change too.
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_outbox WHERE table_name = ? AND row_id IN (?, ?, ?) AND version <= ?"
        ).execute(
            arguments: StatementArguments(
                databaseValues: [change.table.databaseValue] + StoreColumns.keyForms(change.rowID) + [change.version.databaseValue]))
    }

    /// Makes the row's entry `operation` (keeping its version when there is one), after a merge
    /// decided the server needs the local side.
    static func requeue(_ operation: PendingChange.Operation, table: String, rowID: UUID, in db: GRDB.Database) throws {
        if let entry = try foldedOutboxEntry(rowID: rowID, in: db) {
            try db.cachedStatement(
                sql: "UPDATE stratusstore_outbox SET operation = ? WHERE table_name = ? AND row_id = ?"
            ).execute(arguments: [operation.rawValue, table, entry.storedKey])
        } else {
            try db.execute(
                sql: """
                    INSERT INTO stratusstore_outbox (table_name, row_id, operation, version)
                    VALUES (?, ?, ?, (SELECT coalesce(max(seq), 0) FROM stratusstore_changes))
                    """, arguments: [table, rowID.upperText, operation.rawValue])
        }
    }

    /// The mark of a table that was mirrored, then made local only.
    private static let localOnlyMark = "local only"

    /// Logs what no trigger captured of the model's synced tables, so that it goes out: the first
    /// time a table is mirrored, its rows the server never had (rows written before: an app adopting
    /// the store, a table switched to synced, rows a migration seeded before
    /// ``StratusStore/open(_:model:mirroring:historyRetention:)``), as inserted; when a table mirrored before and
    /// then made local only is synced again, what changed meanwhile (rows added, rows that differ
    /// from the server's record as last known, rows deleted). Once per table while it stays
    /// synced; without `sending`, tables are only marked.
    static func adoptUncapturedRows(of model: StoreModel, in db: GRDB.Database, sending: Bool) throws {
        for table in model.tables {
            let adoptedKey = "adopted." + table.name
            let adopted = try value(adoptedKey, in: db)
            guard table.isSynced else {
                if adopted != nil { try setValue(localOnlyMark, for: adoptedKey, in: db) }
                continue
            }
            if adopted == nil {
                if sending { try logUncapturedRows(of: table, in: db) }
            } else if adopted.flatMap(String.fromDatabaseValue) == localOnlyMark {
                if sending { try logChangesWhileLocalOnly(of: table, in: db) }
            } else {
                continue
            }
            try setValue(true, for: adoptedKey, in: db)
        }
    }

    /// Logs the changes a table made local only went through, against the server's records as last
    /// known: rows with no record (added), rows whose mirrored values differ from their record's
    /// (edited), records whose row is gone (deleted). Rows with an outbox entry are left to it.
    private static func logChangesWhileLocalOnly(of table: StoreTable, in db: GRDB.Database) throws {
        let columns = try StoreColumns(table, in: db)
        var queued = Set<UUID>()
        let outboxKeys = try DatabaseValue.fetchCursor(
            db, sql: "SELECT row_id FROM stratusstore_outbox WHERE table_name = ?", arguments: [table.name])
        while let key = try outboxKeys.next() { if let rowID = UUID(databaseKey: key) { queued.insert(rowID) } }
        var records: [UUID: ServerRecord] = [:]
        for row in try Row.fetchAll(
            db, sql: "SELECT row_id, system_fields, ancestor FROM stratusstore_records WHERE table_name = ?",
            arguments: [table.name])
        {
            if let rowID = UUID(databaseKey: row["row_id"]) { records[rowID] = try ServerRecord(row: row) }
        }
        var changes: [(key: DatabaseValue, operation: String)] = []
        var present = Set<UUID>()
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM \(table.name.quotedDatabaseIdentifier)")
        while let row = try rows.next() {
            let key: DatabaseValue = row[columns.key]
            guard let rowID = UUID(databaseKey: key) else { continue }
            present.insert(rowID)
            guard !queued.contains(rowID) else { continue }
            if let record = records[rowID] {
                let values = RecordMapping.columnValues(of: row, columns: columns)
                if values != AncestorEncoding.resolved(record.values, against: [values]) { changes.append((key, "update")) }
            } else {
                changes.append((key, "insert"))
            }
        }
        for rowID in records.keys where !present.contains(rowID) && !queued.contains(rowID) {
            changes.append((rowID.upperText.databaseValue, "delete"))
        }
        try ChangeCapture.logChanges(into: table.name, changes, in: db)
    }

    /// Logs as inserted the rows of `table` that the server never had and that no change or outbox
    /// entry names.
    private static func logUncapturedRows(of table: StoreTable, in db: GRDB.Database) throws {
        let columns = try StoreColumns(table, in: db)
        // Rows the server had, and rows whose changes were ever captured or queued, in one read
        // each (a look-up per row would read the change log once per row).
        var known = Set<UUID>()
        for sql in [
            "SELECT row_id FROM stratusstore_records WHERE table_name = ?",
            "SELECT DISTINCT row_id FROM stratusstore_changes WHERE table_name = ?",
            "SELECT row_id FROM stratusstore_outbox WHERE table_name = ?",
        ] {
            let keys = try DatabaseValue.fetchCursor(db, sql: sql, arguments: [table.name])
            while let key = try keys.next() { if let rowID = UUID(databaseKey: key) { known.insert(rowID) } }
        }
        let keys = try DatabaseValue.fetchCursor(
            db, sql: "SELECT \(columns.key.quotedDatabaseIdentifier) FROM \(table.name.quotedDatabaseIdentifier)")
        var uncaptured: [DatabaseValue] = []
        while let key = try keys.next() {
            guard let rowID = UUID(databaseKey: key), !known.contains(rowID) else { continue }
            uncaptured.append(key)
        }
        try ChangeCapture.logChanges(into: table.name, uncaptured.map { ($0, "insert") }, in: db)
    }

    /// Drops the row's entry whatever its version: the server holds what the row holds.
    static func dropOutboxEntry(table: String, rowID: UUID, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_outbox WHERE table_name = ? AND row_id IN (?, ?, ?)"
        ).execute(arguments: StatementArguments(databaseValues: [table.databaseValue] + StoreColumns.keyForms(rowID)))
    }

    /// Empties the outbox.
    static func clearOutbox(in db: GRDB.Database) throws {
        try db.execute(sql: "DELETE FROM stratusstore_outbox")
    }

    // MARK: Zones

    /// The zone of a row that lives elsewhere than the store's own zone; `nil` for a row of the
    /// store's zone, or a new row of a store of the shared database not placed yet.
    static func zone(ofRow rowID: UUID, in db: GRDB.Database) throws -> RecordZone.ID? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT zone_name, owner_name FROM stratusstore_row_zones WHERE row_id = ?"),
            arguments: [rowID.upperText]
        ).map { RecordZone.ID(zoneName: $0["zone_name"], ownerName: $0["owner_name"]) }
    }

    /// Places a row of `table` in `zoneID`; `nil`: in the store's own zone.
    static func setZone(_ zoneID: RecordZone.ID?, table: String, rowID: UUID, in db: GRDB.Database) throws {
        if let zoneID {
            try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO stratusstore_row_zones (row_id, table_name, zone_name, owner_name) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [rowID.upperText, table, zoneID.zoneName, zoneID.ownerName])
        } else {
            try db.cachedStatement(sql: "DELETE FROM stratusstore_row_zones WHERE row_id = ?").execute(arguments: [rowID.upperText])
        }
    }

    /// Whether any row lives outside the store's own zone.
    static func hasRowsInOtherZones(in db: GRDB.Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stratusstore_row_zones)") ?? false
    }

    /// The system fields of the server's records the store keeps: of the store's own zone when
    /// `zoneID` is `nil`, else of `zoneID`.
    static func systemFieldsOfServerRecords(inZone zoneID: RecordZone.ID?, in db: GRDB.Database) throws -> [Data] {
        if let zoneID {
            return try Data.fetchAll(
                db,
                sql: """
                    SELECT r.system_fields FROM stratusstore_records r
                    JOIN stratusstore_row_zones z ON z.row_id = r.row_id WHERE z.zone_name = ? AND z.owner_name = ?
                    """,
                arguments: [zoneID.zoneName, zoneID.ownerName])
        }
        return try Data.fetchAll(
            db,
            sql: """
                SELECT system_fields FROM stratusstore_records
                WHERE row_id NOT IN (SELECT row_id FROM stratusstore_row_zones)
                """)
    }

    /// The rows placed in `zoneID`, with their tables.
    static func rows(inZone zoneID: RecordZone.ID, in db: GRDB.Database) throws -> [(table: String, rowID: UUID)] {
        try Row.fetchAll(
            db, sql: "SELECT table_name, row_id FROM stratusstore_row_zones WHERE zone_name = ? AND owner_name = ?",
            arguments: [zoneID.zoneName, zoneID.ownerName]
        ).compactMap { row in UUID(text: row["row_id"]).map { (row["table_name"], $0) } }
    }

    /// Every row's zone, by row, for rows outside the store's own zone.
    static func rowZones(in db: GRDB.Database) throws -> [UUID: RecordZone.ID] {
        var zones: [UUID: RecordZone.ID] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT row_id, zone_name, owner_name FROM stratusstore_row_zones") {
            guard let rowID = UUID(text: row["row_id"]) else { continue }
            zones[rowID] = RecordZone.ID(zoneName: row["zone_name"], ownerName: row["owner_name"])
        }
        return zones
    }

    /// Notes that the record `recordID` of a moved row is to be deleted from the zone it left,
    /// with its change tag and values as this device knew it (``movedRecord(_:in:)``).
    static func addMoved(
        _ recordID: Stratus.Record.ID, changeTag: String?, values: [String: DatabaseValue], in db: GRDB.Database
    ) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO stratusstore_moved (record_name, zone_name, owner_name, change_tag, ancestor)
                VALUES (?, ?, ?, ?, ?)
                """,
            arguments: [
                recordID.recordName, recordID.zoneID.zoneName, recordID.zoneID.ownerName, changeTag,
                AncestorEncoding.encode(values),
            ])
    }

    /// A record a moved row left behind: its change tag and values as this device last knew them.
    struct MovedRecord {
        var changeTag: String?
        var values: [String: DatabaseValue]
    }

    /// The record `recordID` if a moved row left it behind; `nil` otherwise.
    static func movedRecord(_ recordID: Stratus.Record.ID, in db: GRDB.Database) throws -> MovedRecord? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT change_tag, ancestor FROM stratusstore_moved WHERE record_name = ? AND zone_name = ? AND owner_name = ?"),
            arguments: [recordID.recordName, recordID.zoneID.zoneName, recordID.zoneID.ownerName]
        ).map { row in
            MovedRecord(changeTag: row["change_tag"], values: try (row["ancestor"] as Data?).map(AncestorEncoding.decode) ?? [:])
        }
    }

    /// Whether `recordID` is the record a moved row left behind.
    static func isMoved(_ recordID: Stratus.Record.ID, in db: GRDB.Database) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(
                sql: "SELECT EXISTS (SELECT 1 FROM stratusstore_moved WHERE record_name = ? AND zone_name = ? AND owner_name = ?)"),
            arguments: [recordID.recordName, recordID.zoneID.zoneName, recordID.zoneID.ownerName]) ?? false
    }

    /// Forgets a left-behind record: it is deleted.
    static func removeMoved(_ recordID: Stratus.Record.ID, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_moved WHERE record_name = ? AND zone_name = ? AND owner_name = ?"
        ).execute(arguments: [recordID.recordName, recordID.zoneID.zoneName, recordID.zoneID.ownerName])
    }

    /// The records moved rows left behind, still to delete.
    static func moved(in db: GRDB.Database) throws -> [Stratus.Record.ID] {
        try Row.fetchAll(db, sql: "SELECT record_name, zone_name, owner_name FROM stratusstore_moved").map {
            Stratus.Record.ID(recordName: $0["record_name"], zoneID: RecordZone.ID(zoneName: $0["zone_name"], ownerName: $0["owner_name"]))
        }
    }

    /// Keeps what the signed-in user may do in `zoneID` (from its share); `nil` forgets it.
    static func setSharePermission(_ permission: Share.ParticipantPermission?, zone zoneID: RecordZone.ID, in db: GRDB.Database) throws {
        if let permission {
            try db.execute(
                sql: "INSERT OR REPLACE INTO stratusstore_shares (zone_name, owner_name, permission) VALUES (?, ?, ?)",
                arguments: [zoneID.zoneName, zoneID.ownerName, permission.rawValue])
        } else {
            try db.execute(
                sql: "DELETE FROM stratusstore_shares WHERE zone_name = ? AND owner_name = ?",
                arguments: [zoneID.zoneName, zoneID.ownerName])
        }
    }

    /// What the signed-in user may do in `zoneID`, as its share last said.
    static func sharePermission(zone zoneID: RecordZone.ID, in db: GRDB.Database) throws -> Share.ParticipantPermission? {
        try String.fetchOne(
            db, sql: "SELECT permission FROM stratusstore_shares WHERE zone_name = ? AND owner_name = ?",
            arguments: [zoneID.zoneName, zoneID.ownerName]
        ).flatMap(Share.ParticipantPermission.init(rawValue:))
    }

    /// Forgets everything the mirror knew of the rows of `zoneID` and of the zone.
    static func forgetZone(_ zoneID: RecordZone.ID, in db: GRDB.Database) throws {
        for (table, rowID) in try rows(inZone: zoneID, in: db) {
            try dropOutboxEntry(table: table, rowID: rowID, in: db)
            try setServerRecord(nil, values: [:], table: table, rowID: rowID, in: db)
        }
        let arguments: StatementArguments = [zoneID.zoneName, zoneID.ownerName]
        try db.execute(sql: "DELETE FROM stratusstore_row_zones WHERE zone_name = ? AND owner_name = ?", arguments: arguments)
        try db.execute(sql: "DELETE FROM stratusstore_moved WHERE zone_name = ? AND owner_name = ?", arguments: arguments)
        try setSharePermission(nil, zone: zoneID, in: db)
    }

    // MARK: Refused changes

    /// Keeps that the server refused for good the change of a row, which the store undid: one per
    /// row, the latest, until the app dismisses it.
    static func recordRefusal(table: String, rowID: UUID, error: CloudError, at date: Date, in db: GRDB.Database) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO stratusstore_refused (row_id, table_name, code, reason, refused_at)
                VALUES (?, ?, ?, ?, ?)
                """, arguments: [rowID.upperText, table, error.code.rawValue, error.message, date.timeIntervalSince1970])
    }

    /// The refused changes kept, the latest first.
    static func refusedChanges(in db: GRDB.Database) throws -> [StoreRefusedChange] {
        try Row.fetchAll(db, sql: "SELECT * FROM stratusstore_refused ORDER BY refused_at DESC, row_id").compactMap { row in
            guard let rowID = UUID(text: row["row_id"]) else { return nil }
            return StoreRefusedChange(
                table: row["table_name"], rowID: rowID,
                error: CloudError(CloudError.Code(rawValue: row["code"]) ?? .internalError, row["reason"]),
                date: Date(timeIntervalSince1970: row["refused_at"]))
        }
    }

    /// Forgets the refused changes of `rowIDs`; of every row when `nil`.
    static func dismissRefusedChanges(_ rowIDs: [UUID]?, in db: GRDB.Database) throws {
        guard let rowIDs else { return try db.execute(sql: "DELETE FROM stratusstore_refused") }
        for rowID in rowIDs {
            try db.execute(sql: "DELETE FROM stratusstore_refused WHERE row_id = ?", arguments: [rowID.upperText])
        }
    }

    // MARK: The mirror's own values

    static func value(_ key: String, in db: GRDB.Database) throws -> DatabaseValue? {
        try DatabaseValue.fetchOne(
            db.cachedStatement(sql: "SELECT value FROM stratusstore_mirror WHERE key = ?"),
            arguments: [key])
    }

    static func setValue(_ value: (any DatabaseValueConvertible)?, for key: String, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO stratusstore_mirror (key, value) VALUES (?, ?)"
        ).execute(arguments: [key, value])
    }
}

extension PendingChange {
    init?(row: Row) {
        guard let rowID = UUID(databaseKey: row["row_id"]),
            let operation = Operation(rawValue: row["operation"])
        else { return nil }
        self.init(table: row["table_name"], rowID: rowID, operation: operation, version: row["version"], storedKey: row["row_id"])
    }
}

/// The ancestor's column values in one BLOB: for each non-null value, its column's name (a 2-byte
/// length, then UTF-8), a type byte, then the value (`1` INTEGER: 8 bytes; `2` REAL: the 8 bytes of
/// its bit pattern; `3` TEXT and `4` BLOB: a 4-byte length, then the bytes; `5` a BLOB kept by its
/// SHA-256: the 32 bytes), big-endian.
///
/// An ancestor keeps a BLOB over ``digestedBlobBytes`` by its digest, not a second copy of the row's
/// bytes: merges only ask whether a side still holds the ancestor's value, which the digest answers
/// (``resolved(_:against:)``). Decoded, such a BLOB is a marker value equal to nothing a row holds.
enum AncestorEncoding {
    struct Malformed: Error, CustomStringConvertible {
        var description: String { "a stored ancestor is malformed" }
    }

    /// The size above which an ancestor keeps a BLOB by its digest.
    static let digestedBlobBytes = 1_024
    /// How a decoded digest starts.
    private static let markerPrefix = Data("stratusstore:sha256:".utf8)

    /// `values` in one BLOB; with `digestingLargeBlobs` (an ancestor's), BLOBs over
    /// ``digestedBlobBytes`` by their SHA-256. Values to write back into a row keep every byte.
    static func encode(_ values: [String: DatabaseValue], digestingLargeBlobs: Bool = true) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        func append<T: FixedWidthInteger>(_ number: T) {
            withUnsafeBytes(of: number.bigEndian) { bytes.append(contentsOf: $0) }
        }
        func begin(_ column: String, tag: UInt8) {
            append(UInt16(column.utf8.count))
            bytes.append(contentsOf: column.utf8)
            bytes.append(tag)
        }
        for (column, value) in values.sorted(by: { $0.key < $1.key }) {
            switch value.storage {
            case .null:
                continue
            case .int64(let integer):
                begin(column, tag: 1)
                append(integer)
            case .double(let real):
                begin(column, tag: 2)
                append(real.bitPattern)
            case .string(let text):
                begin(column, tag: 3)
                append(UInt32(text.utf8.count))
                bytes.append(contentsOf: text.utf8)
            case .blob(let data) where digestingLargeBlobs && data.count > digestedBlobBytes:
                begin(column, tag: 5)
                bytes.append(contentsOf: SHA256.hash(data: data))
            case .blob(let data):
                begin(column, tag: 4)
                append(UInt32(data.count))
                bytes.append(contentsOf: data)
            }
        }
        return Data(bytes)
    }

    static func decode(_ data: Data) throws -> [String: DatabaseValue] {
        let bytes = [UInt8](data)
        var offset = 0
        func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, offset + count <= bytes.count else { throw Malformed() }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        func number(_ count: Int) throws -> UInt64 {
            try take(count).reduce(0) { $0 << 8 | UInt64($1) }
        }
        var values: [String: DatabaseValue] = [:]
        while offset < bytes.count {
            let name = String(decoding: try take(Int(try number(2))), as: UTF8.self)
            switch try take(1).first {
            case 1: values[name] = Int64(bitPattern: try number(8)).databaseValue
            case 2: values[name] = Double(bitPattern: try number(8)).databaseValue
            case 3: values[name] = String(decoding: try take(Int(try number(4))), as: UTF8.self).databaseValue
            case 4: values[name] = Data(try take(Int(try number(4)))).databaseValue
            case 5: values[name] = (markerPrefix + Data(try take(SHA256.byteCount))).databaseValue
            default: throw Malformed()
            }
        }
        return values
    }

    /// The digest a decoded marker stands for; `nil` for a real value.
    private static func digest(ofMarker value: DatabaseValue) -> Data? {
        guard case .blob(let data) = value.storage, data.count == markerPrefix.count + SHA256.byteCount,
            data.starts(with: markerPrefix)
        else { return nil }
        return data.suffix(SHA256.byteCount)
    }

    /// The ancestor `values` with each BLOB kept by its digest replaced by the equal value among
    /// `candidates` (the row here, the server's record); one none of them holds stays a marker,
    /// unequal to any value, or goes when `droppingUnresolved`.
    static func resolved(
        _ values: [String: DatabaseValue], against candidates: [[String: DatabaseValue]?], droppingUnresolved: Bool = false
    ) -> [String: DatabaseValue] {
        var resolved = values
        for (column, value) in values {
            guard let digest = digest(ofMarker: value) else { continue }
            let match = candidates.lazy.compactMap { $0?[column] }.first { candidate in
                guard case .blob(let bytes) = candidate.storage else { return false }
                return Data(SHA256.hash(data: bytes)) == digest
            }
            resolved[column] = match ?? (droppingUnresolved ? nil : value)
        }
        return resolved
    }

    /// Whether `values` hold a BLOB kept by its digest that no candidate resolved.
    static func holdsDigests(_ values: [String: DatabaseValue]) -> Bool {
        values.values.contains { digest(ofMarker: $0) != nil }
    }
}
