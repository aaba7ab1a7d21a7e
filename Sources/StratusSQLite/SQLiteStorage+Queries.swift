import Foundation
import GRDB
import GRDBSQLite
import StratusModel
public import StratusStorage
import Synchronization

extension SQLiteStorage {
    // MARK: Queries

    public func queryRecords(_ query: RecordQuery, zones names: [String]?, in database: DatabaseLocator) async throws
        -> QueryPage
    {
        let zoneIDs: [(String, Int64)] = try await withDatabase(database) { db, databaseID in
            if let names {
                return try names.map { ($0, try Self.requireZone(db, databaseID, $0).id) }
            }
            return try Row.fetchAll(
                db, sql: "SELECT name, id FROM zones WHERE database_id = ? AND deleted = 0 ORDER BY name",
                arguments: [databaseID]
            ).map { ($0["name"], $0["id"]) }
        }
        return try await QueryExecutor.run(
            query, zoneWide: names == nil && database.scope != .public, reader: QueryReader(pool: pool, zoneIDs: Dictionary(uniqueKeysWithValues: zoneIDs),
                                       zones: zoneIDs.map(\.0), recordType: query.recordType))
    }

    /// Reads the query index of some zones for ``QueryExecutor``, one read per step.
    struct QueryReader: QueryIndexReader {
        let pool: DatabasePool
        let zoneIDs: [String: Int64]
        let zones: [String]
        let recordType: String

        private var zoneNames: [Int64: String] {
            Dictionary(uniqueKeysWithValues: zoneIDs.map { ($1, $0) })
        }

        /// `AND value >= ? AND value < ?` for a range, with its arguments.
        private static func bounds(_ range: ScalarRange) -> (sql: String, arguments: StatementArguments) {
            var sql = ""
            var arguments = StatementArguments()
            if let lower = range.lower {
                sql += lower.inclusive ? " AND value >= ?" : " AND value > ?"
                arguments += [lower.value.databaseValue]
            }
            if let upper = range.upper {
                sql += upper.inclusive ? " AND value <= ?" : " AND value < ?"
                arguments += [upper.value.databaseValue]
            }
            return (sql, arguments)
        }

        func scanValues(
            zone: String, field: String, range: ScalarRange, descending: Bool, after: IndexPosition?, limit: Int
        ) async throws -> [IndexPosition] {
            var sql = """
                SELECT value, created_ms, name FROM record_index
                WHERE zone_id = ? AND record_type = ? AND field = ? AND kind = 0
                """
            var arguments: StatementArguments = [zoneIDs[zone], recordType, field]
            let bounds = Self.bounds(range)
            sql += bounds.sql
            arguments += bounds.arguments
            if let after {
                sql += descending ? " AND (value, created_ms, name) < (?, ?, ?)" : " AND (value, created_ms, name) > (?, ?, ?)"
                arguments += [after.value.databaseValue, after.created, after.name]
            }
            sql += descending
                ? " ORDER BY value DESC, created_ms DESC, name DESC LIMIT ?" : " ORDER BY value, created_ms, name LIMIT ?"
            arguments += [limit]
            return try await pool.read { [sql, arguments] db in
                try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).compactMap { row in
                    QueryScalar(row[0] as DatabaseValue).map { IndexPosition(value: $0, created: row[1], name: row[2]) }
                }
            }
        }

        func candidates(_ source: CandidateSource) async throws -> [(zone: String, name: String)] {
            let zoneList = zones.map { _ in "?" }.joined(separator: ",")
            var arguments = StatementArguments(zones.map { zoneIDs[$0]! })
            arguments += [recordType]
            var sql = "SELECT DISTINCT zone_id, name FROM record_index WHERE zone_id IN (\(zoneList)) AND record_type = ?"
            func list(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ",") }
            switch source {
            case .values(let field, let values):
                sql += " AND field = ? AND kind = 0 AND value IN (\(list(values.count)))"
                arguments += [field]
                arguments += StatementArguments(values.map(\.databaseValue))
            case .range(let field, let range):
                let bounds = Self.bounds(range)
                sql += " AND field = ? AND kind = 0" + bounds.sql
                arguments += [field]
                arguments += bounds.arguments
            case .tokens(let fields, let tokens):
                sql += " AND field IN (\(list(fields.count))) AND kind = 1 AND value IN (\(list(tokens.count)))"
                arguments += StatementArguments(fields)
                arguments += StatementArguments(tokens)
            case .latitudes(let field, let range):
                let bounds = Self.bounds(range)
                sql += " AND field = ? AND kind = 2" + bounds.sql
                arguments += [field]
                arguments += bounds.arguments
            case .allOfType:
                sql = "SELECT zone_id, name FROM records WHERE zone_id IN (\(zoneList)) AND record_type = ? AND deleted = 0"
            }
            let zoneNames = zoneNames
            return try await pool.read { [sql, arguments] db in
                try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in (zoneNames[row[0]] ?? "", row[1]) }
            }
        }

        func records(zone: String, names: [String]) async throws -> [StoredRecord] {
            guard let zoneID = zoneIDs[zone] else { return [] }
            return try await pool.read { db in
                try SQLiteStorage.fetchRecords(db, zoneID: zoneID, names: names).values.filter { !$0.deleted }
            }
        }
    }
}
