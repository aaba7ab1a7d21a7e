import Foundation
import GRDB
import GRDBSQLite
public import StratusModel
import StratusStorage
import Synchronization

/// The ``SchemaStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Schema

    /// The schema of a container's environment, decoded once per version.
    func loadSchema(_ db: Database, container: String, environment: ContainerEnvironment) throws -> Schema {
        let key = container + "\u{0}" + environment.rawValue
        guard let version = try db.cachedStatement(
            sql: "SELECT version FROM schemas WHERE container_id = ? AND environment = ?"
        ).firstInteger(container, environment.rawValue)
        else { return Schema() }
        if let cached = schemas.schema(key, version: version) { return cached }
        let definition = try Data.fetchOne(
            db, sql: "SELECT definition FROM schemas WHERE container_id = ? AND environment = ?",
            arguments: [container, environment.rawValue]) ?? Data()
        let schema = try Schema(jsonBytes: [UInt8](definition))
        schemas.store(schema, key: key, version: version)
        return schema
    }

    /// Stores a new version of a schema. The cache is left alone: it is filled by reads, so a
    /// version rolled back with its transaction is never cached.
    static func storeSchema(
        _ db: Database, _ schema: Schema, container: String, environment: ContainerEnvironment
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO schemas (container_id, environment, version, definition) VALUES (?, ?, 1, ?)
                ON CONFLICT (container_id, environment) DO UPDATE SET
                    version = version + 1, definition = excluded.definition
                """,
            arguments: [container, environment.rawValue, Data(schema.jsonBytes)])
    }

    public func schema(container: String, environment: ContainerEnvironment) async throws -> Schema {
        try await pool.read { db in try self.loadSchema(db, container: container, environment: environment) }
    }

    public func updateSchema(
        container: String, environment: ContainerEnvironment, _ change: @escaping @Sendable (Schema) throws -> Schema
    ) async throws -> Schema {
        try await pool.write { db in
            let old = try self.loadSchema(db, container: container, environment: environment)
            let new = try change(old)
            guard new != old else { return old }
            try Self.storeSchema(db, new, container: container, environment: environment)
            // Records of types whose index options grew get their entries now.
            let zones = try Int64.fetchAll(
                db,
                sql: """
                    SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                    WHERE databases.container_id = ? AND databases.environment = ? AND zones.deleted = 0
                    """,
                arguments: [container, environment.rawValue])
            for backfill in IndexBackfill.needed(from: old, to: new) {
                for zoneID in zones {
                    for field in backfill.fields {
                        try db.execute(
                            sql: "DELETE FROM record_index WHERE zone_id = ? AND record_type = ? AND field = ?",
                            arguments: [zoneID, backfill.recordType, field])
                    }
                    let statement = try db.cachedStatement(
                        sql: "SELECT \(Self.recordColumns) FROM records WHERE zone_id = ? AND record_type = ? AND deleted = 0")
                    statement.bind(zoneID, backfill.recordType)
                    let records = try Self.fetchStoredRecords(statement)
                    for record in records {
                        try Self.insertIndexEntries(db, zoneID: zoneID, record, backfill.entries(of: record))
                    }
                }
            }
            return new
        }
    }

    public func deleteData(container: String, environment: ContainerEnvironment) async throws {
        try await pool.write { db in
            let zones = """
                SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                WHERE databases.container_id = ? AND databases.environment = ?
                """
            let arguments: StatementArguments = [container, environment.rawValue]
            try Self.deleteContents(ofZones: zones, arguments: arguments, db)
            try db.execute(sql: "DELETE FROM zones WHERE id IN (\(zones))", arguments: arguments)
            try db.execute(
                sql: "DELETE FROM databases WHERE container_id = ? AND environment = ?", arguments: arguments)
            try db.execute(
                sql: "DELETE FROM subscriptions WHERE container_id = ? AND environment = ?", arguments: arguments)
        }
    }
}
