import Foundation
import GRDB
import GRDBSQLite
import StratusModel
import StratusSQLite
import StratusStorage

/// The baseline: the same rows written to and read from tables laid out like Stratus's `records`
/// and `record_index` (their indexes included: each is a B-tree every insert goes into), through GRDB
/// directly, with the same durability and batch size: each record with the query index rows its
/// schema gives it. No HTTP, no JSON parsing, no change-tag checks, no index computation: what SQLite
/// alone costs.
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
                CREATE INDEX records_by_type ON records (zone_id, record_type) WHERE deleted = 0;
                CREATE TABLE record_index (
                    zone_id INTEGER NOT NULL, record_type TEXT NOT NULL, field TEXT NOT NULL, kind INTEGER NOT NULL,
                    value NOT NULL, longitude REAL, created_ms INTEGER NOT NULL, name TEXT NOT NULL,
                    PRIMARY KEY (zone_id, record_type, field, kind, value, created_ms, name)) WITHOUT ROWID;
                """)
        }
    }

    /// The query index rows of records holding `fields`, under `schema`, computed before the clock
    /// starts: the baseline inserts them, it does not derive them.
    static func indexEntries(of fields: [[UInt8]], schema: Schema) -> [[IndexEntry]] {
        fields.map { json in
            IndexEntry.entries(
                of: StoredRecord(
                    name: "", recordType: "Note", changeTag: "", fieldsJSON: json,
                    created: RecordStamp(timestamp: 0, userRecordName: "_user"),
                    modified: RecordStamp(timestamp: 0, userRecordName: "_user"), deleted: false, sequence: 0),
                schema: schema)
        }
    }

    /// Inserts rows `range` in transactions of `batch` rows, named as the workload names them; row `i`
    /// holds `fields[i % count]` and has the index rows `indexEntries[i % count]`.
    func insert(
        _ range: Range<Int>, batch: Int, prefix: String, naming: Workload.RecordNaming = .counted, fields: [[UInt8]],
        indexEntries: [[IndexEntry]]
    ) async throws {
        for start in stride(from: range.lowerBound, to: range.upperBound, by: batch) {
            let end = min(start + batch, range.upperBound)
            // A transaction's rows are created at one time, later than the one before, as a request's are.
            let created = 1_700_000_000_000 + Int64(start)
            try await pool.write { db in
                let statement = try db.cachedStatement(sql: """
                    INSERT INTO records (zone_id, name, record_type, change_tag, fields, created_ms, created_by,
                        created_device, modified_ms, modified_by, modified_device, seq, deleted)
                    VALUES (1, ?, 'Note', ?, ?, ?, '_user', NULL, ?, '_user', NULL, ?, 0)
                    """)
                let indexRow = try db.cachedStatement(sql: """
                    INSERT INTO record_index (zone_id, record_type, field, kind, value, longitude, created_ms, name)
                    VALUES (1, 'Note', ?, ?, ?, ?, ?, ?)
                    """)
                for index in start..<end {
                    let name = Workload.recordName(index, prefix: prefix, naming: naming)
                    try statement.execute(arguments: [
                        name, "1-\(index)", Data(fields[index % fields.count]), created, created,
                        index + 1,
                    ])
                    for entry in indexEntries[index % indexEntries.count] {
                        try Self.insert(entry, created: created, name: name, with: indexRow, db)
                    }
                }
            }
        }
    }

    /// Steps the one-row index insert, bound through SQLite's C API (GRDB's argument arrays would
    /// cost more than the insert).
    private static func insert(
        _ entry: IndexEntry, created: Int64, name: String, with insert: Statement, _ db: Database
    ) throws {
        let handle = insert.sqliteStatement
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        sqlite3_reset(handle)
        sqlite3_bind_text(handle, 1, entry.field, -1, transient)
        sqlite3_bind_int64(handle, 2, Int64(entry.kind.rawValue))
        switch entry.value {
        case .integer(let value): sqlite3_bind_int64(handle, 3, value)
        case .real(let value): sqlite3_bind_double(handle, 3, value)
        case .text(let value): sqlite3_bind_text(handle, 3, value, -1, transient)
        }
        if let longitude = entry.longitude { sqlite3_bind_double(handle, 4, longitude) } else { sqlite3_bind_null(handle, 4) }
        sqlite3_bind_int64(handle, 5, created)
        sqlite3_bind_text(handle, 6, name, -1, transient)
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
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
