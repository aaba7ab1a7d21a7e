import Foundation
import GRDB
import GRDBSQLite
import StratusModel
import StratusStorage
import Synchronization

/// The ``AssetStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Assets

    public func registerAsset(checksum: String, size: Int64, timestamp: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO assets (checksum, size, registered_ms) VALUES (?, ?, ?)
                    ON CONFLICT (checksum) DO UPDATE SET registered_ms = max(registered_ms, excluded.registered_ms)
                    """,
                arguments: [checksum, size, timestamp])
        }
    }

    public func collectAssets(registeredBefore timestamp: Int64) async throws -> [String] {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM uploads WHERE uploaded_ms < ?", arguments: [timestamp])
            return try String.fetchAll(
                db,
                sql: """
                    DELETE FROM assets WHERE registered_ms < ?
                        AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
                    RETURNING checksum
                    """,
                arguments: [timestamp])
        }
    }
}
