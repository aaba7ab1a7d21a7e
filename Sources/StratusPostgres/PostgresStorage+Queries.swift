import Logging
import Synchronization
import NIOCore
import PostgresNIO
import StratusModel
public import StratusStorage

extension PostgresStorage {
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
            query, zoneWide: names == nil && database.scope != .public,
            reader: QueryReader(
                storage: self, zoneIDs: Dictionary(uniqueKeysWithValues: zoneIDs), zones: zoneIDs.map(\.0),
                recordType: query.recordType))
    }

    /// Reads the query index of some zones for ``QueryExecutor``, one statement per step.
    struct QueryReader: QueryIndexReader {
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
            zone: String, field: String, range: ScalarRange, descending: Bool, after: IndexPosition?, limit: Int
        ) async throws -> [IndexPosition] {
            // The text form gets its own name: ORDER BY `number` must mean the numeric column.
            var statement = Statement(
                sql: "SELECT number::text AS number_text, string, scalar, created_ms, name FROM record_index WHERE ")
            statement.sql += "zone_id = \(statement.bind(zoneIDs[zone] ?? -1)) AND record_type = \(statement.bind(recordType))"
            statement.sql += " AND field = \(statement.bind(field)) AND kind = 0"
            statement.bound(range)
            if let after {
                let columns = IndexRows.columns(after.value)
                statement.sql += " AND (number, string, created_ms, name) \(descending ? "<" : ">") "
                    + "(\(statement.bind(columns.number))::numeric, \(statement.bind(columns.string)), "
                    + "\(statement.bind(after.created)), \(statement.bind(after.name)))"
            }
            statement.sql += descending
                ? " ORDER BY number DESC, string DESC, created_ms DESC, name DESC"
                : " ORDER BY number, string, created_ms, name"
            statement.sql += " LIMIT \(statement.bind(limit))"
            return try await statement.run(storage).compactMap { row in
                let (number, string, scalar, created, name) = try row.decode((String, String, Int32, Int64, String).self)
                return IndexRows.scalar(number: number, string: string, scalar: scalar).map {
                    IndexPosition(value: $0, created: created, name: name)
                }
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
