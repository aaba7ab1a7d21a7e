import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusStorage
import Synchronization

/// The ``MaintenanceStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Maintenance

    public func purgeTombstones(before timestamp: Int64) async throws -> Int {
        try await transaction { connection in
            try await connection.run(
                """
                UPDATE zones SET purged_seq = greatest(zones.purged_seq, purged.seq)
                FROM (SELECT zone_id, max(seq) AS seq FROM records WHERE deleted AND modified_ms < \(timestamp)
                      GROUP BY zone_id) AS purged
                WHERE zones.id = purged.zone_id
                """, logger: logger)
            var removed = try await connection.run(
                "DELETE FROM records WHERE deleted AND modified_ms < \(timestamp) RETURNING 1", logger: logger
            ).collect().count
            try await connection.run(
                """
                UPDATE databases SET purged_seq = greatest(databases.purged_seq, purged.seq)
                FROM (SELECT database_id, max(change_seq) AS seq FROM zones WHERE deleted AND changed_ms < \(timestamp)
                      GROUP BY database_id) AS purged
                WHERE databases.id = purged.database_id
                """, logger: logger)
            removed += try await connection.run(
                "DELETE FROM zones WHERE deleted AND changed_ms < \(timestamp) RETURNING 1", logger: logger
            ).collect().count
            return removed
        }
    }
}
