import Foundation
import GRDB
import Stratus

/// What the mirror keeps beside the app's tables, in its own (`stratusstore_`) tables:
///
/// - `stratusstore_records`: per mirrored row, the system fields of the server's record as this
///   device last fetched or saved it (its change tag bases the next save), and that change tag
///   apart, so that a fetched record this device already holds is recognised without decoding;
/// - `stratusstore_ancestors`: that record's values, one row per column holding SQLite's own value
///   (the common ancestor a merge compares both sides with);
/// - `stratusstore_row_zones`: the zone of each row that lives elsewhere than the store's own zone
///   (a share's zone; in a store of the shared database, every row's), with its table;
/// - `stratusstore_moved`: records of rows moved into a share's zone, still to delete from the
///   zone they left;
/// - `stratusstore_shares`: what the signed-in user may do in each shared zone, from its share;
/// - `stratusstore_mirror`: the sync engine's state and whether the store's zone exists.
enum StoreMetadata {
    static func create(in db: GRDB.Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS stratusstore_records (
                    table_name TEXT NOT NULL, row_id TEXT NOT NULL, system_fields BLOB NOT NULL, change_tag TEXT,
                    PRIMARY KEY (table_name, row_id)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS stratusstore_ancestors (
                    table_name TEXT NOT NULL, row_id TEXT NOT NULL, column_name TEXT NOT NULL, value,
                    PRIMARY KEY (table_name, row_id, column_name)) WITHOUT ROWID;
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
    }

    // MARK: The server's last record of a row

    /// The server's record of a row as last known: its system fields and values.
    struct ServerRecord {
        var systemFields: Data
        var values: [String: DatabaseValue]
    }

    static func serverRecord(table: String, rowID: UUID, in db: GRDB.Database) throws -> ServerRecord? {
        guard let systemFields = try Data.fetchOne(
            db.cachedStatement(sql: "SELECT system_fields FROM stratusstore_records WHERE table_name = ? AND row_id = ?"),
            arguments: [table, rowID.uuidString])
        else { return nil }
        var values: [String: DatabaseValue] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(sql: "SELECT column_name, value FROM stratusstore_ancestors WHERE table_name = ? AND row_id = ?"),
            arguments: [table, rowID.uuidString])
        {
            values[row["column_name"]] = row["value"]
        }
        return ServerRecord(systemFields: systemFields, values: values)
    }

    /// The change tag of the server's record of a row as last known.
    static func changeTag(table: String, rowID: UUID, in db: GRDB.Database) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT change_tag FROM stratusstore_records WHERE table_name = ? AND row_id = ?"),
            arguments: [table, rowID.uuidString])
    }

    /// Remembers the server's record of a row, holding the mirrored column `values`; `nil` forgets
    /// it (the record is gone from the server).
    static func setServerRecord(
        _ record: Stratus.Record?, values: [String: DatabaseValue], table: String, rowID: UUID, in db: GRDB.Database
    ) throws {
        let arguments: StatementArguments = [table, rowID.uuidString]
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_ancestors WHERE table_name = ? AND row_id = ?"
        ).execute(arguments: arguments)
        guard let record else {
            try db.cachedStatement(
                sql: "DELETE FROM stratusstore_records WHERE table_name = ? AND row_id = ?"
            ).execute(arguments: arguments)
            return
        }
        try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO stratusstore_records (table_name, row_id, system_fields, change_tag) VALUES (?, ?, ?, ?)"
        ).execute(arguments: arguments + [record.encodeSystemFields(), record.recordChangeTag])
        for (column, value) in values where !value.isNull {
            try db.cachedStatement(
                sql: "INSERT INTO stratusstore_ancestors (table_name, row_id, column_name, value) VALUES (?, ?, ?, ?)"
            ).execute(arguments: arguments + [column, value])
        }
    }

    // MARK: The outbox

    /// The outbox entry of a row, found whatever form its key is stored in (a UUID names one row
    /// of all synced tables: it is the record's name in the store's one zone).
    static func outboxEntry(rowID: UUID, in db: GRDB.Database) throws -> PendingChange? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM stratusstore_outbox WHERE row_id IN (?, ?, ?)"),
            arguments: StatementArguments(StoreColumns.keyForms(rowID))
        ).flatMap { try pendingChange($0, in: db) }
    }

    /// The outbox entry of `row`, with the zone its row lives in.
    private static func pendingChange(_ row: Row, in db: GRDB.Database) throws -> PendingChange? {
        guard var change = PendingChange(row: row) else { return nil }
        change.zoneID = try zone(ofRow: change.rowID, in: db)
        return change
    }

    /// How many rows have a change the server has not confirmed.
    static func outboxCount(in db: GRDB.Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM stratusstore_outbox") ?? 0
    }

    /// The outbox entries with a version above `version`, oldest first.
    static func outbox(after version: Int64, in db: GRDB.Database) throws -> [PendingChange] {
        try Row.fetchAll(
            db.cachedStatement(sql: "SELECT * FROM stratusstore_outbox WHERE version > ? ORDER BY version"),
            arguments: [version])
            .compactMap { try pendingChange($0, in: db) }
    }

    /// Removes `change`'s entry if the row changed no more since that version.
    static func confirm(_ change: PendingChange, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_outbox WHERE table_name = ? AND row_id = ? AND version = ?"
        ).execute(arguments: [change.table, change.storedKey, change.version])
    }

    /// Makes the row's entry `operation` (keeping its version when there is one), after a merge
    /// decided the server needs the local side.
    static func requeue(_ operation: PendingChange.Operation, table: String, rowID: UUID, in db: GRDB.Database) throws {
        if let entry = try outboxEntry(rowID: rowID, in: db) {
            try db.cachedStatement(
                sql: "UPDATE stratusstore_outbox SET operation = ? WHERE table_name = ? AND row_id = ?"
            ).execute(arguments: [operation.rawValue, table, entry.storedKey])
        } else {
            try db.execute(
                sql: """
                    INSERT INTO stratusstore_outbox (table_name, row_id, operation, version)
                    VALUES (?, ?, ?, (SELECT coalesce(max(seq), 0) FROM stratusstore_changes))
                    """, arguments: [table, rowID.uuidString, operation.rawValue])
        }
    }

    /// Drops the row's entry whatever its version: the server holds what the row holds.
    static func dropOutboxEntry(table: String, rowID: UUID, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "DELETE FROM stratusstore_outbox WHERE table_name = ? AND row_id IN (?, ?, ?)"
        ).execute(arguments: StatementArguments([table.databaseValue] + StoreColumns.keyForms(rowID)))
    }

    // MARK: Zones

    /// The zone of a row that lives elsewhere than the store's own zone; `nil` for a row of the
    /// store's zone, or a new row of a store of the shared database not placed yet.
    static func zone(ofRow rowID: UUID, in db: GRDB.Database) throws -> RecordZone.ID? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT zone_name, owner_name FROM stratusstore_row_zones WHERE row_id = ?"),
            arguments: [rowID.uuidString]
        ).map { RecordZone.ID(zoneName: $0["zone_name"], ownerName: $0["owner_name"]) }
    }

    /// Places a row of `table` in `zoneID`; `nil`: in the store's own zone.
    static func setZone(_ zoneID: RecordZone.ID?, table: String, rowID: UUID, in db: GRDB.Database) throws {
        if let zoneID {
            try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO stratusstore_row_zones (row_id, table_name, zone_name, owner_name) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [rowID.uuidString, table, zoneID.zoneName, zoneID.ownerName])
        } else {
            try db.cachedStatement(sql: "DELETE FROM stratusstore_row_zones WHERE row_id = ?").execute(arguments: [rowID.uuidString])
        }
    }

    /// Whether any row lives outside the store's own zone.
    static func hasRowsInOtherZones(in db: GRDB.Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stratusstore_row_zones)") ?? false
    }

    /// The rows placed in `zoneID`, with their tables.
    static func rows(inZone zoneID: RecordZone.ID, in db: GRDB.Database) throws -> [(table: String, rowID: UUID)] {
        try Row.fetchAll(
            db, sql: "SELECT table_name, row_id FROM stratusstore_row_zones WHERE zone_name = ? AND owner_name = ?",
            arguments: [zoneID.zoneName, zoneID.ownerName]
        ).compactMap { row in UUID(uuidString: row["row_id"]).map { (row["table_name"], $0) } }
    }

    /// Every row's zone, by row, for rows outside the store's own zone.
    static func rowZones(in db: GRDB.Database) throws -> [UUID: RecordZone.ID] {
        var zones: [UUID: RecordZone.ID] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT row_id, zone_name, owner_name FROM stratusstore_row_zones") {
            guard let rowID = UUID(uuidString: row["row_id"]) else { continue }
            zones[rowID] = RecordZone.ID(zoneName: row["zone_name"], ownerName: row["owner_name"])
        }
        return zones
    }

    /// Notes that the record `recordID` of a moved row is to be deleted from the zone it left.
    static func addMoved(_ recordID: Stratus.Record.ID, in db: GRDB.Database) throws {
        try db.execute(
            sql: "INSERT OR IGNORE INTO stratusstore_moved (record_name, zone_name, owner_name) VALUES (?, ?, ?)",
            arguments: [recordID.recordName, recordID.zoneID.zoneName, recordID.zoneID.ownerName])
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
        guard let rowID = UUID.fromDatabaseValue(row["row_id"]),
            let operation = Operation(rawValue: row["operation"])
        else { return nil }
        self.init(table: row["table_name"], rowID: rowID, operation: operation, version: row["version"], storedKey: row["row_id"])
    }
}
