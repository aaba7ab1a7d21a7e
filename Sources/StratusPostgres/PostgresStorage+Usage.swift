import Logging
import PostgresNIO
import StratusModel
public import StratusStorage

/// The ``UsageStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    /// What `account` holds in `container`, over both environments, as the transaction sees it.
    func usage(_ connection: PostgresConnection, container: String, account: String) async throws -> StorageUsage {
        let (records, recordBytes, assetBytes) = try await connection.run(
            """
            SELECT coalesce(sum(u.records), 0)::bigint, coalesce(sum(u.record_bytes), 0)::bigint,
                coalesce(sum(u.asset_bytes), 0)::bigint
            FROM account_usage u JOIN zones z ON z.id = u.zone_id JOIN databases d ON d.id = z.database_id
            WHERE u.account = \(account) AND d.container_id = \(container)
            """, logger: logger
        ).decode((Int64, Int64, Int64).self).collect()[0]
        return StorageUsage(records: records, recordBytes: recordBytes, assetBytes: assetBytes)
    }

    /// Adds what writes changed of each account's holdings in a zone, in one statement.
    func addUsage(_ connection: PostgresConnection, _ changes: [String: StorageUsage], zoneID: Int64) async throws {
        guard !changes.isEmpty else { return }
        let accounts = Array(changes.keys)
        let usages = accounts.map { changes[$0]! }
        try await connection.run(
            """
            INSERT INTO account_usage (zone_id, account, records, record_bytes, asset_bytes)
            SELECT \(zoneID), * FROM unnest(
                \(accounts)::text[], \(usages.map(\.records))::bigint[], \(usages.map(\.recordBytes))::bigint[],
                \(usages.map(\.assetBytes))::bigint[])
            ON CONFLICT (zone_id, account) DO UPDATE SET records = account_usage.records + excluded.records,
                record_bytes = account_usage.record_bytes + excluded.record_bytes,
                asset_bytes = account_usage.asset_bytes + excluded.asset_bytes
            """, logger: logger)
    }

    public func usageByAccount(container: String) async throws -> [String: StorageUsage] {
        try await read { connection in
            var usage: [String: StorageUsage] = [:]
            for try await (account, records, recordBytes, assetBytes) in try await connection.run(
                """
                SELECT u.account, sum(u.records)::bigint, sum(u.record_bytes)::bigint, sum(u.asset_bytes)::bigint
                FROM account_usage u JOIN zones z ON z.id = u.zone_id JOIN databases d ON d.id = z.database_id
                WHERE d.container_id = \(container) GROUP BY u.account
                """, logger: logger
            ).decode((String, Int64, Int64, Int64).self) {
                usage[account] = StorageUsage(records: records, recordBytes: recordBytes, assetBytes: assetBytes)
            }
            return usage
        }
    }

    /// The bytes of `user`'s uploads since `since` that no record holds, and of `ticket`'s.
    private func uploadedBytes(
        _ connection: PostgresConnection, container: String, user: String, ticket: String, since: Int64
    ) async throws -> (pending: Int64, ticket: Int64) {
        try await connection.run(
            """
            SELECT
                (SELECT coalesce(sum(size), 0)::bigint FROM uploads u
                 WHERE container_id = \(container) AND user_record_name = \(user) AND uploaded_ms >= \(since)
                    AND NOT EXISTS (SELECT 1 FROM record_assets ra WHERE ra.checksum = u.checksum)),
                (SELECT coalesce(sum(size), 0)::bigint FROM uploads WHERE ticket = \(ticket))
            """, logger: logger
        ).decode((Int64, Int64).self).collect()[0]
    }

    public func uploadedBytes(container: String, user: String, ticket: String, since: Int64) async throws
        -> (pending: Int64, ticket: Int64)
    {
        try await read { connection in
            try await uploadedBytes(connection, container: container, user: user, ticket: ticket, since: since)
        }
    }

    public func recordUpload(_ upload: PendingUpload, since: Int64, maxPendingBytes: Int64?, ticketAllowance: Int64)
        async throws -> Bool
    {
        try await transaction { connection in
            // One user's uploads are checked one after the other, on every instance.
            try await connection.run(
                "SELECT pg_advisory_xact_lock(hashtextextended(\(upload.container + "\n" + upload.user), 0))",
                logger: logger)
            let used = try await uploadedBytes(
                connection, container: upload.container, user: upload.user, ticket: upload.ticket, since: since)
            guard used.ticket + upload.size <= ticketAllowance,
                maxPendingBytes.map({ used.pending + upload.size <= $0 }) ?? true
            else { return false }
            try await connection.run(
                """
                INSERT INTO uploads (container_id, user_record_name, ticket, checksum, size, uploaded_ms)
                VALUES (\(upload.container), \(upload.user), \(upload.ticket), \(upload.checksum), \(upload.size),
                    \(upload.timestamp))
                """, logger: logger)
            return true
        }
    }

    public func forgetUpload(_ upload: PendingUpload) async throws {
        try await execute(
            """
            DELETE FROM uploads WHERE ctid IN (SELECT ctid FROM uploads
                WHERE ticket = \(upload.ticket) AND checksum = \(upload.checksum) AND size = \(upload.size)
                    AND uploaded_ms = \(upload.timestamp) LIMIT 1)
            """)
    }
}
