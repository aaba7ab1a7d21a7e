import NIOCore
import PostgresNIO
import StratusModel
public import StratusStorage

/// The ``TransferStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    public func users(container: String) async throws -> [UserInfo] {
        let query = PostgresQuery(
            unsafeSQL: "SELECT \(Self.userColumns) FROM users WHERE container_id = $1 ORDER BY record_name",
            binds: Self.binds(container))
        return try await read { connection in
            try await Self.users(container: container, from: connection.run(query, logger: logger))
        }
    }

    public func identities(container: String) async throws -> [FederatedIdentity] {
        try await read { connection in
            try await Self.federatedIdentities(
                connection.run(
                    """
                    SELECT \(unescaped: Self.identityColumns) FROM user_identities WHERE container_id = \(container)
                    ORDER BY user_record_name, created_ms, issuer, subject
                    """, logger: logger))
        }
    }

    public func apiTokens(container: String) async throws -> [APITokenInfo] {
        try await read { connection in
            try await connection.run(
                """
                SELECT token_hash, name, created_ms FROM api_tokens
                WHERE container_id = \(container) ORDER BY created_ms, token_hash
                """, logger: logger
            ).decode((String, String, Int64).self).collect().map {
                APITokenInfo(hash: $0.0, container: container, name: $0.1, createdAt: $0.2)
            }
        }
    }

    public func databases(container: String) async throws -> [DatabaseLocator] {
        try await read { connection in
            try await connection.run(
                "SELECT environment, scope, owner FROM databases WHERE container_id = \(container) ORDER BY id",
                logger: logger
            ).decode((String, String, String).self).collect().compactMap { row in
                guard let environment = ContainerEnvironment(rawValue: row.0), let scope = DatabaseScope(rawValue: row.1)
                else { return nil }
                return DatabaseLocator(container: container, environment: environment, scope: scope, owner: row.2)
            }
        }
    }

    public func importRecords(_ records: [StoredRecord], zone: String, in database: DatabaseLocator) async throws {
        if zone != ZoneID.defaultZoneName, try await self.zone(named: zone, in: database) == nil {
            _ = try await createZone(named: zone, in: database, timestamp: records.first?.modified.timestamp ?? 0)
        }
        try await transaction { connection in
            let databaseID = try await ensureDatabase(connection, database)
            let zoneState = try await requireZone(connection, databaseID, zone, lock: true)
            let schema = try await loadSchema(connection, container: database.container, environment: database.environment)
            let (rows, sequence, usageChanges) = RecordWriteExecutor.importRows(
                records, zone: zoneState, database: database,
                current: try await fetchRecords(connection, zoneID: zoneState.id, names: records.map(\.name)),
                schema: schema.schema)
            var batch = RecordBatch(zoneID: zoneState.id)
            for operation in rows {
                if batch.holds(anyOf: operation) { try await batch.flush(connection, logger: logger) }
                batch.add(operation)
            }
            try await batch.flush(connection, logger: logger)
            try await addUsage(connection, usageChanges, zoneID: zoneState.id)
            try await connection.run("UPDATE zones SET seq = \(sequence) WHERE id = \(zoneState.id)", logger: logger)
        }
    }
}
