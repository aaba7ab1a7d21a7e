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
        ).flatMap(PendingChange.init(row:))
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
            .compactMap(PendingChange.init(row:))
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
