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

    public func collectAssets(registeredBefore timestamp: Int64) async throws -> [String] {
        try await column(
            String.self,
            """
            DELETE FROM assets WHERE checksum IN (
                SELECT checksum FROM assets WHERE registered_ms < \(timestamp)
                    AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
                FOR UPDATE SKIP LOCKED)
            RETURNING checksum
            """)
    }
}
