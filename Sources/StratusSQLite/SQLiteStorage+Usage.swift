import GRDB
import StratusModel
public import StratusStorage

/// The ``UsageStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    /// What `account` holds in `container`, over both environments, as the transaction of `db` sees it.
    static func usage(_ db: Database, container: String, account: String) throws -> StorageUsage {
        let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT coalesce(sum(u.records), 0), coalesce(sum(u.record_bytes), 0), coalesce(sum(u.asset_bytes), 0)
                    FROM account_usage u JOIN zones z ON z.id = u.zone_id JOIN databases d ON d.id = z.database_id
                    WHERE u.account = ? AND d.container_id = ?
                    """),
            arguments: [account, container])!
        return StorageUsage(records: row[0], recordBytes: row[1], assetBytes: row[2])
    }

    /// Adds what a write changed of each account's holdings in a zone.
    static func addUsage(_ db: Database, _ changes: [String: StorageUsage], zoneID: Int64) throws {
        for (account, change) in changes {
            try db.cachedStatement(
                sql: """
                    INSERT INTO account_usage (zone_id, account, records, record_bytes, asset_bytes) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (zone_id, account) DO UPDATE SET records = records + excluded.records,
                        record_bytes = record_bytes + excluded.record_bytes, asset_bytes = asset_bytes + excluded.asset_bytes
                    """
            ).execute(arguments: [zoneID, account, change.records, change.recordBytes, change.assetBytes])
        }
    }

    public func usageByAccount(container: String) async throws -> [String: StorageUsage] {
        try await pool.read { db in
            var usage: [String: StorageUsage] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT u.account, sum(u.records), sum(u.record_bytes), sum(u.asset_bytes)
                    FROM account_usage u JOIN zones z ON z.id = u.zone_id JOIN databases d ON d.id = z.database_id
                    WHERE d.container_id = ? GROUP BY u.account
                    """,
                arguments: [container])
            {
                usage[row[0]] = StorageUsage(records: row[1], recordBytes: row[2], assetBytes: row[3])
            }
            return usage
        }
    }

    /// The bytes of `user`'s uploads since `since` that no record holds, and of `ticket`'s.
    private static func uploadedBytes(
        _ db: Database, container: String, user: String, ticket: String, since: Int64
    ) throws -> (pending: Int64, ticket: Int64) {
        let pending = try Int64.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT coalesce(sum(size), 0) FROM uploads u
                    WHERE container_id = ? AND user_record_name = ? AND uploaded_ms >= ?
                        AND NOT EXISTS (SELECT 1 FROM record_assets ra WHERE ra.checksum = u.checksum)
                    """),
            arguments: [container, user, since]) ?? 0
        let ticket = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT coalesce(sum(size), 0) FROM uploads WHERE ticket = ?"), arguments: [ticket]) ?? 0
        return (pending, ticket)
    }

    public func uploadedBytes(container: String, user: String, ticket: String, since: Int64) async throws
        -> (pending: Int64, ticket: Int64)
    {
        try await pool.read { db in
            try Self.uploadedBytes(db, container: container, user: user, ticket: ticket, since: since)
        }
    }

    public func recordUpload(_ upload: PendingUpload, since: Int64, maxPendingBytes: Int64?, ticketAllowance: Int64)
        async throws -> Bool
    {
        // One writer at a time: the sums read here cannot change before the insert.
        try await pool.write { db in
            let used = try Self.uploadedBytes(
                db, container: upload.container, user: upload.user, ticket: upload.ticket, since: since)
            guard used.ticket + upload.size <= ticketAllowance,
                maxPendingBytes.map({ used.pending + upload.size <= $0 }) ?? true
            else { return false }
            try db.execute(
                sql: """
                    INSERT INTO uploads (container_id, user_record_name, ticket, checksum, size, uploaded_ms)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [upload.container, upload.user, upload.ticket, upload.checksum, upload.size, upload.timestamp])
            return true
        }
    }

    public func forgetUpload(_ upload: PendingUpload) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM uploads WHERE rowid IN (SELECT rowid FROM uploads
                        WHERE ticket = ? AND checksum = ? AND size = ? AND uploaded_ms = ? LIMIT 1)
                    """,
                arguments: [upload.ticket, upload.checksum, upload.size, upload.timestamp])
        }
    }
}
