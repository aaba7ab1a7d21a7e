import GRDB
import GRDBSQLite

extension Statement {
    /// Resets the statement and binds `values` to its parameters in order, through SQLite's C API:
    /// on the write path, GRDB's argument arrays (``StatementArguments``) cost more than the
    /// statements they run.
    ///
    /// The statement runs inside a transaction GRDB opened, and its rows are read with
    /// ``step()``; it is reset before its next use.
    func bind<each Value: StatementBinding>(_ values: repeat each Value) {
        let handle = sqliteStatement
        sqlite3_reset(handle)
        var index: Int32 = 0
        for value in repeat each values {
            index += 1
            // Binding reads no file: it fails only for an index the statement does not have.
            _ = value.bind(to: handle, at: index)
        }
    }

    /// Steps the statement once: `true` when it produced a row, `false` when it is done.
    func step() throws -> Bool {
        let handle = sqliteStatement
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqlite3_db_handle(handle))),
                sql: sql)
        }
    }

    /// Runs the statement with `values` to its end.
    func run<each Value: StatementBinding>(_ values: repeat each Value) throws {
        bind(repeat each values)
        defer { sqlite3_reset(sqliteStatement) }
        while try step() {}
    }

    /// The first column of the statement's first row with `values`, as an integer; `nil` when it
    /// has no row.
    func firstInteger<each Value: StatementBinding>(_ values: repeat each Value) throws -> Int64? {
        bind(repeat each values)
        defer { sqlite3_reset(sqliteStatement) }
        return try step() ? sqlite3_column_int64(sqliteStatement, 0) : nil
    }
}

/// Bytes bound as a BLOB (an empty one for no bytes, never NULL), without first becoming `Data`:
/// a save binds every record's fields.
struct BlobBinding: StatementBinding {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    func bind(to sqliteStatement: SQLiteStatement, at index: CInt) -> CInt {
        guard !bytes.isEmpty else { return sqlite3_bind_zeroblob(sqliteStatement, index, 0) }
        return bytes.withUnsafeBytes {
            // SQLITE_TRANSIENT: SQLite copies the bytes before this returns.
            sqlite3_bind_blob(
                sqliteStatement, index, $0.baseAddress, CInt($0.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
    }
}
