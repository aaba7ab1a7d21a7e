import Foundation
import GRDB
import StratusSQLite

/// The baseline: the same rows written to and read from a table laid out like Stratus's `records`
/// table, through GRDB directly, with the same durability and batch size. No HTTP, no JSON parsing,
/// no change-tag checks: what SQLite alone costs.
struct RawSQLiteBaseline {
    let pool: DatabasePool

    init(path: String, durability: SQLiteStorage.Durability) throws {
        var configuration = Configuration()
        let synchronous = durability == .full ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE records (
                    zone_id INTEGER NOT NULL, name TEXT NOT NULL, record_type TEXT NOT NULL, change_tag TEXT NOT NULL,
                    fields BLOB NOT NULL, created_ms INTEGER NOT NULL, created_by TEXT NOT NULL, created_device TEXT,
                    modified_ms INTEGER NOT NULL, modified_by TEXT NOT NULL, modified_device TEXT,
                    seq INTEGER NOT NULL, deleted INTEGER NOT NULL, UNIQUE (zone_id, name));
                CREATE INDEX records_change_order ON records (zone_id, seq);
                CREATE INDEX records_tombstones ON records (modified_ms) WHERE deleted = 1;
                """)
        }
    }

    /// Inserts rows `range` in transactions of `batch` rows.
    func insert(_ range: Range<Int>, batch: Int, prefix: String, fields: [[UInt8]]) async throws {
        for start in stride(from: range.lowerBound, to: range.upperBound, by: batch) {
            let end = min(start + batch, range.upperBound)
            try await pool.write { db in
                let statement = try db.cachedStatement(sql: """
                    INSERT INTO records (zone_id, name, record_type, change_tag, fields, created_ms, created_by,
                        created_device, modified_ms, modified_by, modified_device, seq, deleted)
                    VALUES (1, ?, 'Note', ?, ?, ?, '_user', NULL, ?, '_user', NULL, ?, 0)
                    """)
                for index in start..<end {
                    try statement.execute(arguments: [
                        "\(prefix)\(index)", "1-\(index)", Data(fields[index % fields.count]),
                        1_700_000_000_000, 1_700_000_000_000, index + 1,
                    ])
                }
            }
        }
    }

    /// Reads every row in change order, `page` rows per query; returns how many it read.
    func readAll(page: Int) async throws -> Int {
        var last: Int64 = 0
        var total = 0
        while true {
            let after = last
            let rows = try await pool.read { db in
                try Row.fetchAll(
                    db.cachedStatement(sql: """
                        SELECT name, record_type, change_tag, fields, created_ms, created_by, created_device,
                            modified_ms, modified_by, modified_device, seq, deleted
                        FROM records WHERE zone_id = 1 AND seq > ? ORDER BY seq LIMIT ?
                        """),
                    arguments: [after, page]
                ).map { row -> (Int64, Data) in (row["seq"], row["fields"]) }
            }
            total += rows.count
            guard let final = rows.last else { return total }
            last = final.0
        }
    }
}
