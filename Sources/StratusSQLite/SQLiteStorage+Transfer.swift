import Foundation
import GRDB
import GRDBSQLite
import StratusModel
public import StratusStorage
import Synchronization

/// The ``TransferStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Export and import

    public func users(container: String) async throws -> [UserInfo] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM users WHERE container_id = ? ORDER BY record_name", arguments: [container])
                .map(Self.userInfo)
        }
    }

    public func identities(container: String) async throws -> [FederatedIdentity] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM user_identities WHERE container_id = ?
                    ORDER BY user_record_name, created_ms, issuer, subject
                    """,
                arguments: [container]
            ).map(Self.federatedIdentity)
        }
    }

    public func apiTokens(container: String) async throws -> [APITokenInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM api_tokens WHERE container_id = ? ORDER BY created_ms, token_hash",
                arguments: [container]
            ).map { APITokenInfo(hash: $0["token_hash"], container: container, name: $0["name"], createdAt: $0["created_ms"]) }
        }
    }

    public func databases(container: String) async throws -> [DatabaseLocator] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT environment, scope, owner FROM databases WHERE container_id = ? ORDER BY id",
                arguments: [container]
            ).compactMap { row in
                guard let environment = ContainerEnvironment(rawValue: row["environment"]),
                    let scope = DatabaseScope(rawValue: row["scope"])
                else { return nil }
                return DatabaseLocator(container: container, environment: environment, scope: scope, owner: row["owner"])
            }
        }
    }

    public func importRecords(_ records: [StoredRecord], zone: String, in database: DatabaseLocator) async throws {
        try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            if try Self.liveZone(db, databaseID, zone) == nil {
                let timestamp = records.first?.modified.timestamp ?? 0
                try db.execute(
                    sql: "INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms) VALUES (?, ?, ?, ?, ?)",
                    arguments: [databaseID, zone, try Self.nextDatabaseSequence(db, databaseID), timestamp, timestamp])
            }
            let zoneState = try Self.requireZone(db, databaseID, zone)
            let (rows, sequence, usageChanges) = RecordWriteExecutor.importRows(
                records, zone: zoneState, database: database,
                current: try Self.fetchRecords(db, zoneID: zoneState.id, names: records.map(\.name)),
                schema: try self.loadSchema(db, container: database.container, environment: database.environment))
            for operation in rows { try Self.write(operation, zoneID: zoneState.id, db) }
            try Self.addUsage(db, usageChanges, zoneID: zoneState.id)
            try db.execute(sql: "UPDATE zones SET seq = ? WHERE id = ?", arguments: [sequence, zoneState.id])
        }
    }
}
