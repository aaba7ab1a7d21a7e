import Logging
import Synchronization
import NIOCore
import PostgresNIO
public import StratusModel
import StratusStorage

/// The ``SchemaStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Schema

    /// The schema of a container's environment with its version (0 before the first), decoded once
    /// per version. A caller that already read the version passes it.
    func loadSchema(
        _ connection: PostgresConnection, container: String, environment: ContainerEnvironment,
        version knownVersion: Int64?? = nil
    ) async throws -> (version: Int64, schema: Schema) {
        let key = container + "\u{0}" + environment.rawValue
        let version: Int64?
        if let knownVersion {
            version = knownVersion
        } else {
            version = try await connection.run(
                "SELECT version FROM schemas WHERE container_id = \(container) AND environment = \(environment.rawValue)",
                logger: logger
            ).decode(Int64.self).collect().first
        }
        guard let version else { return (0, Schema()) }
        if let cached = schemas.withLock({ $0[key] }), cached.version == version { return (version, cached.schema) }
        let rows = try await connection.run(
            """
            SELECT version, definition FROM schemas
            WHERE container_id = \(container) AND environment = \(environment.rawValue)
            """, logger: logger
        ).decode((Int64, ByteBuffer).self).collect()
        guard let row = rows.first else { return (0, Schema()) }
        let schema = try Schema(jsonBytes: Array(row.1.readableBytesView))
        schemas.withLock { $0[key] = (row.0, schema) }
        return (row.0, schema)
    }

    /// Makes the other schema writers of a container's environment wait until this transaction ends.
    /// `shared`: only wait for a schema writer, and make it wait, without excluding other holders of
    /// the shared lock; zone creations take it, so that a schema change's backfill, which locks the
    /// zones it finds, cannot miss a zone created meanwhile (``updateSchema(container:environment:_:)``).
    func lockSchema(
        _ connection: PostgresConnection, container: String, environment: ContainerEnvironment, shared: Bool = false
    ) async throws {
        let key = container + "\u{1}" + environment.rawValue
        if shared {
            try await connection.run("SELECT pg_advisory_xact_lock_shared(hashtextextended(\(key), 0))", logger: logger)
        } else {
            try await connection.run("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger: logger)
        }
    }

    /// Stores a new version of a schema (the caller holds ``lockSchema(_:container:environment:)``).
    func storeSchema(
        _ connection: PostgresConnection, _ schema: Schema, container: String, environment: ContainerEnvironment
    ) async throws {
        let definition = ByteBuffer(bytes: schema.jsonBytes)
        try await connection.run(
            """
            INSERT INTO schemas (container_id, environment, version, definition)
            VALUES (\(container), \(environment.rawValue), 1, \(definition))
            ON CONFLICT (container_id, environment) DO UPDATE SET
                version = schemas.version + 1, definition = excluded.definition
            """, logger: logger)
    }

    public func schema(container: String, environment: ContainerEnvironment) async throws -> Schema {
        try await read { connection in
            try await loadSchema(connection, container: container, environment: environment).schema
        }
    }

    public func updateSchema(
        container: String, environment: ContainerEnvironment, _ change: @escaping @Sendable (Schema) throws -> Schema
    ) async throws -> Schema {
        try await transaction { connection in
            try await lockSchema(connection, container: container, environment: environment)
            let old = try await loadSchema(connection, container: container, environment: environment).schema
            let new = try change(old)
            guard new != old else { return old }
            try await storeSchema(connection, new, container: container, environment: environment)
            // Records of types whose index options grew get their entries now.
            let backfills = IndexBackfill.needed(from: old, to: new)
            guard !backfills.isEmpty else { return new }
            // Each zone is locked as its writers lock it, so a save that read the old schema commits
            // before the zone's records are read here, and one that comes later reads the new schema
            // once this commits. A zone being created holds the schema lock shared, so it is either
            // committed and found here, or created after this commits. (A writer whose save grows the
            // schema holds its zone and waits for the schema lock held here: PostgreSQL ends that
            // deadlock and the loser runs again.)
            let zoneIDs = try await connection.run(
                """
                SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                WHERE databases.container_id = \(container) AND databases.environment = \(environment.rawValue)
                    AND NOT zones.deleted
                ORDER BY zones.id FOR UPDATE OF zones
                """, logger: logger
            ).decode(Int64.self).collect()
            for backfill in backfills {
                for zoneID in zoneIDs {
                    try await connection.run(
                        """
                        DELETE FROM record_index WHERE zone_id = \(zoneID) AND record_type = \(backfill.recordType)
                            AND field = ANY(\(Array(backfill.fields)))
                        """, logger: logger)
                    let records = try await Self.storedRecords(
                        connection.run(
                            """
                            SELECT \(unescaped: Self.recordColumns) FROM records
                            WHERE zone_id = \(zoneID) AND record_type = \(backfill.recordType) AND NOT deleted
                            """, logger: logger))
                    var rows = IndexRows()
                    for record in records {
                        for entry in backfill.entries(of: record) {
                            rows.append(entry, of: record)
                        }
                    }
                    try await rows.insert(connection, zoneID: zoneID, logger: logger)
                }
            }
            return new
        }
    }

    public func deleteData(container: String, environment: ContainerEnvironment) async throws {
        try await transaction { connection in
            let zones = """
                SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                WHERE databases.container_id = $1 AND databases.environment = $2
                """
            let binds = Self.binds(container, environment.rawValue)
            try await deleteContents(ofZones: zones, binds: binds, connection)
            for table in ["databases", "subscriptions"] {
                // Zones go with their database (ON DELETE CASCADE).
                try await connection.run(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(table) WHERE container_id = $1 AND environment = $2", binds: binds),
                    logger: logger)
            }
        }
    }
}
