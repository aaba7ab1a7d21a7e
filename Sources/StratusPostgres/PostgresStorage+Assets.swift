import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusStorage
import Synchronization

/// The ``AssetStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Assets

    public func registerAsset(checksum: String, size: Int64, timestamp: Int64) async throws {
        try await execute(
            """
            INSERT INTO assets (checksum, size, registered_ms) VALUES (\(checksum), \(size), \(timestamp))
            ON CONFLICT (checksum) DO UPDATE SET registered_ms = greatest(assets.registered_ms, excluded.registered_ms)
            """)
    }

    /// Locks the candidates first, skipping those a committing save holds (``knownAssets``), then
    /// deletes those no record holds in a second statement, whose snapshot sees every save that
    /// committed before the lock was taken: one statement would judge them by the snapshot taken
    /// before it waited for nothing, and miss a save that committed meanwhile.
    public func collectAssets(registeredBefore timestamp: Int64) async throws -> [String] {
        try await transaction { connection in
            try await connection.run("DELETE FROM uploads WHERE uploaded_ms < \(timestamp)", logger: logger)
            let locked = try await connection.run(
                """
                SELECT checksum FROM assets WHERE registered_ms < \(timestamp)
                    AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
                FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).decode(String.self).collect()
            guard !locked.isEmpty else { return [] }
            return try await connection.run(
                """
                DELETE FROM assets WHERE checksum = ANY(\(locked))
                    AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
                RETURNING checksum
                """, logger: logger
            ).decode(String.self).collect()
        }
    }
}
