import Foundation
import GRDB
import GRDBSQLite
import StratusModel
import StratusStorage
import Synchronization

/// The ``MaintenanceStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Maintenance

    public func purgeTombstones(before timestamp: Int64) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE zones SET purged_seq = max(purged_seq, purged.seq)
                    FROM (SELECT zone_id, max(seq) AS seq FROM records WHERE deleted = 1 AND modified_ms < ?
                          GROUP BY zone_id) AS purged
                    WHERE zones.id = purged.zone_id
                    """, arguments: [timestamp])
            try db.execute(sql: "DELETE FROM records WHERE deleted = 1 AND modified_ms < ?", arguments: [timestamp])
            var removed = db.changesCount
            try db.execute(
                sql: """
                    UPDATE databases SET purged_seq = max(purged_seq, purged.seq)
                    FROM (SELECT database_id, max(change_seq) AS seq FROM zones WHERE deleted = 1 AND changed_ms < ?
                          GROUP BY database_id) AS purged
                    WHERE databases.id = purged.database_id
                    """, arguments: [timestamp])
            try db.execute(sql: "DELETE FROM zones WHERE deleted = 1 AND changed_ms < ?", arguments: [timestamp])
            removed += db.changesCount
            return removed
        }
    }

    public func migrationStatus() async throws -> (applied: [String], latest: String) {
        let migrator = SQLiteMigrations.migrator
        let applied = try await pool.read { db in try migrator.appliedIdentifiers(db) }
        return (applied.sorted(), migrator.migrations.last ?? "")
    }
}
