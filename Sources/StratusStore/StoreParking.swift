import Foundation
import GRDB
import Stratus

/// The rows a user changed on this device and had not sent when another user signed in (or they
/// signed out): kept in `stratusstore_parked`, by user, with what the mirror knew of each (the
/// server's record as last known, its zone), and put back with their outbox entries when that
/// user signs in on this device again, as if they had never left. The rest of their rows are
/// fetched again then.
enum StoreParking {
    /// Keeps every row the outbox lists for `user`, as it is now; returns how many. Run before the
    /// rows are purged, in the same transaction. Columns that are not mirrored are not kept.
    static func park(_ user: String, layout: MirrorLayout, in db: GRDB.Database) throws -> Int {
        var parked = 0
        var columnsByTable: [String: StoreColumns] = [:]
        for entry in try StoreMetadata.outbox(after: 0, in: db) {
            guard let table = layout.model.table(named: entry.table) else { continue }
            let columns = try columnsByTable[entry.table] ?? StoreColumns(table, in: db)
            columnsByTable[entry.table] = columns
            var values: [String: DatabaseValue]?
            if entry.operation == .save {
                // A row the outbox lists as saved but that is gone has nothing to keep.
                guard let current = try layout.mapping.columnValues(of: table, rowID: entry.rowID, columns: columns, in: db)
                else { continue }
                values = current
            }
            let server = try Row.fetchOne(
                db, sql: "SELECT system_fields, change_tag, ancestor FROM stratusstore_records WHERE table_name = ? AND row_id = ?",
                arguments: [entry.table, entry.rowID.upperText])
            let zoneID = try StoreMetadata.zone(ofRow: entry.rowID, in: db)
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO stratusstore_parked (
                        user_name, table_name, row_id, operation, row_values, system_fields, change_tag, ancestor,
                        zone_name, owner_name)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    user, entry.table, entry.rowID.upperText, entry.operation.rawValue, values.map { AncestorEncoding.encode($0, digestingLargeBlobs: false) },
                    server?["system_fields"] as Data?, server?["change_tag"] as String?, server?["ancestor"] as Data?,
                    zoneID?.zoneName, zoneID?.ownerName,
                ])
            parked += 1
        }
        return parked
    }

    /// Puts back the rows parked for `user`, each with its outbox entry and what the mirror knew
    /// of it, and forgets them as parked; returns how many. Write it as the author `import`: the
    /// outbox entries are written here, not captured.
    static func restore(_ user: String, layout: MirrorLayout, in db: GRDB.Database) throws -> Int {
        let rows = try Row.fetchAll(db, sql: "SELECT * FROM stratusstore_parked WHERE user_name = ?", arguments: [user])
        var columnsByTable: [String: StoreColumns] = [:]
        for row in rows {
            let tableName: String = row["table_name"]
            guard let table = layout.model.table(named: tableName), let rowID = UUID(text: row["row_id"]),
                let operation = PendingChange.Operation(rawValue: row["operation"])
            else { continue }
            let columns = try columnsByTable[tableName] ?? StoreColumns(table, in: db)
            columnsByTable[tableName] = columns
            if operation == .save, let encoded: Data = row["row_values"] {
                try layout.mapping.write(
                    try AncestorEncoding.decode(encoded), rowID: rowID, storedKey: try columns.storedKey(of: rowID, in: db), to: table,
                    columns: columns, in: db)
            }
            if let systemFields: Data = row["system_fields"] {
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO stratusstore_records (table_name, row_id, system_fields, change_tag, ancestor)
                        VALUES (?, ?, ?, ?, ?)
                        """,
                    arguments: [tableName, rowID.upperText, systemFields, row["change_tag"] as String?, row["ancestor"] as Data?])
            }
            if let zoneName: String = row["zone_name"], let ownerName: String = row["owner_name"] {
                try StoreMetadata.setZone(RecordZone.ID(zoneName: zoneName, ownerName: ownerName), table: tableName, rowID: rowID, in: db)
            }
            try StoreMetadata.requeue(operation, table: tableName, rowID: rowID, in: db)
        }
        try db.execute(sql: "DELETE FROM stratusstore_parked WHERE user_name = ?", arguments: [user])
        return rows.count
    }

    /// The users with rows parked on this device, and how many each.
    static func parkedRowCounts(in db: GRDB.Database) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT user_name, count(*) AS n FROM stratusstore_parked GROUP BY user_name") {
            counts[row["user_name"]] = row["n"]
        }
        return counts
    }
}
