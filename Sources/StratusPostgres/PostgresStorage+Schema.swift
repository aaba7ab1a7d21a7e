import Logging
import Synchronization
import NIOCore
import PostgresNIO
public import StratusModel
public import StratusStorage

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
    func lockSchema(_ connection: PostgresConnection, container: String, environment: ContainerEnvironment) async throws {
        try await connection.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(\(container + "\u{1}" + environment.rawValue), 0))",
            logger: logger)
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
            let zoneIDs = try await connection.run(
                """
                SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                WHERE databases.container_id = \(container) AND databases.environment = \(environment.rawValue)
                    AND NOT zones.deleted
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
                            rows.append(entry, recordType: backfill.recordType, name: record.name)
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
            for table in ["records", "record_references", "record_index", "record_assets"] {
                try await connection.run(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE zone_id IN (\(zones))", binds: binds),
                    logger: logger)
            }
            for table in ["databases", "subscriptions"] {
                // Zones go with their database (ON DELETE CASCADE).
                try await connection.run(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(table) WHERE container_id = $1 AND environment = $2", binds: binds),
                    logger: logger)
            }
        }
    }

    // MARK: Queries

    public func queryRecords(_ query: RecordQuery, zones names: [String]?, in database: DatabaseLocator) async throws
        -> QueryPage
    {
        let zoneIDs: [(String, Int64)] = try await withDatabase(database) { connection, databaseID in
            if let names {
                var zones: [(String, Int64)] = []
                for name in names { zones.append((name, try await requireZone(connection, databaseID, name).id)) }
                return zones
            }
            return try await connection.run(
                "SELECT name, id FROM zones WHERE database_id = \(databaseID) AND NOT deleted ORDER BY name",
                logger: logger
            ).decode((String, Int64).self).collect()
        }
        return try await QueryExecutor.run(
            query,
            reader: QueryReader(
                storage: self, zoneIDs: Dictionary(uniqueKeysWithValues: zoneIDs), zones: zoneIDs.map(\.0),
                recordType: query.recordType))
    }

    /// Reads the query index of some zones for ``QueryExecutor``, one statement per step.
    private struct QueryReader: QueryIndexReader {
        let storage: PostgresStorage
        let zoneIDs: [String: Int64]
        let zones: [String]
        let recordType: String

        /// A statement assembled with its bindings.
        private struct Statement {
            var sql: String
            var binds = PostgresBindings()

            /// Binds a value and returns its placeholder.
            mutating func bind(_ value: some PostgresDynamicTypeEncodable) -> String {
                binds.append(value)
                return "$\(binds.count)"
            }

            /// ` AND number >= $n` (or `string`) for each bound of a range.
            mutating func bound(_ range: ScalarRange) {
                for (bound, comparison) in [(range.lower, ">"), (range.upper, "<")] {
                    guard let bound else { continue }
                    let columns = IndexRows.columns(bound.value)
                    let op = comparison + (bound.inclusive ? "=" : "")
                    sql += columns.scalar == 2
                        ? " AND string \(op) \(bind(columns.string))"
                        : " AND number \(op) \(bind(columns.number))::numeric"
                }
            }

            func run(_ storage: PostgresStorage) async throws -> [PostgresRow] {
                let query = PostgresQuery(unsafeSQL: sql, binds: binds)
                return try await storage.read { connection in
                    try await connection.run(query, logger: storage.logger).collect()
                }
            }
        }

        func scanValues(
            zone: String, field: String, range: ScalarRange, descending: Bool, after: (QueryScalar, String)?,
            limit: Int
        ) async throws -> [(value: QueryScalar, name: String)] {
            // The text form gets its own name: ORDER BY `number` must mean the numeric column.
            var statement = Statement(sql: "SELECT number::text AS number_text, string, scalar, name FROM record_index WHERE ")
            statement.sql += "zone_id = \(statement.bind(zoneIDs[zone] ?? -1)) AND record_type = \(statement.bind(recordType))"
            statement.sql += " AND field = \(statement.bind(field)) AND kind = 0"
            statement.bound(range)
            if let after {
                let columns = IndexRows.columns(after.0)
                statement.sql += " AND (number, string, name) \(descending ? "<" : ">") "
                    + "(\(statement.bind(columns.number))::numeric, \(statement.bind(columns.string)), "
                    + "\(statement.bind(after.1)))"
            }
            statement.sql += descending
                ? " ORDER BY number DESC, string DESC, name DESC" : " ORDER BY number, string, name"
            statement.sql += " LIMIT \(statement.bind(limit))"
            return try await statement.run(storage).compactMap { row in
                let (number, string, scalar, name) = try row.decode((String, String, Int32, String).self)
                return IndexRows.scalar(number: number, string: string, scalar: scalar).map { ($0, name) }
            }
        }

        func candidates(_ source: CandidateSource) async throws -> [(zone: String, name: String)] {
            var statement = Statement(sql: "")
            let zoneList = statement.bind(zones.map { zoneIDs[$0]! })
            let type = statement.bind(recordType)
            statement.sql = "SELECT DISTINCT zone_id, name FROM record_index WHERE zone_id = ANY(\(zoneList)) "
                + "AND record_type = \(type)"
            switch source {
            case .values(let field, let values):
                let columns = values.map(IndexRows.columns)
                statement.sql += " AND field = \(statement.bind(field)) AND kind = 0 AND (number, string) IN "
                    + "(SELECT n::numeric, s FROM unnest(\(statement.bind(columns.map(\.number)))::text[], "
                    + "\(statement.bind(columns.map(\.string)))::text[]) AS v(n, s))"
            case .range(let field, let range):
                statement.sql += " AND field = \(statement.bind(field)) AND kind = 0"
                statement.bound(range)
            case .tokens(let fields, let tokens):
                statement.sql += " AND field = ANY(\(statement.bind(fields))) AND kind = 1"
                    + " AND string = ANY(\(statement.bind(tokens)))"
            case .latitudes(let field, let range):
                statement.sql += " AND field = \(statement.bind(field)) AND kind = 2"
                statement.bound(range)
            case .allOfType:
                statement.sql = "SELECT zone_id, name FROM records WHERE zone_id = ANY(\(zoneList)) "
                    + "AND record_type = \(type) AND NOT deleted"
            }
            let zoneNames = Dictionary(uniqueKeysWithValues: zoneIDs.map { ($1, $0) })
            return try await statement.run(storage).map { row in
                let (zoneID, name) = try row.decode((Int64, String).self)
                return (zoneNames[zoneID] ?? "", name)
            }
        }

        func records(zone: String, names: [String]) async throws -> [StoredRecord] {
            guard let zoneID = zoneIDs[zone] else { return [] }
            return try await storage.read { connection in
                try await storage.fetchRecords(connection, zoneID: zoneID, names: names).values.filter { !$0.deleted }
            }
        }
    }
}
