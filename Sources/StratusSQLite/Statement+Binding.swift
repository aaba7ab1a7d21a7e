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
            // Text goes with its length (``TextBinding``); an absent optional binds NULL as GRDB does.
            if let text = value as? String {
                _ = TextBinding(text).bind(to: handle, at: index)
            } else {
                _ = value.bind(to: handle, at: index)
            }
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

/// Text bound with its length in bytes. GRDB binds a string up to its first U+0000 (as a C
/// string), so `"victim\0zzz"` would be compared as `"victim"`; bound with its length, the whole
/// text is stored and compared. (Stratus refuses U+0000 in every request before it reaches storage;
/// this keeps the write path exact whatever reaches it.)
struct TextBinding: StatementBinding {
    let text: String

    init(_ text: String) {
        self.text = text
    }

    func bind(to sqliteStatement: SQLiteStatement, at index: CInt) -> CInt {
        var text = text
        return text.withUTF8 { bytes in
            // SQLITE_TRANSIENT: SQLite copies the bytes before this returns. An empty string may have
            // no storage, and a NULL pointer would bind NULL: "" is its own C string.
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(sqliteStatement, index, "", 0, nil) }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(
                    sqliteStatement, index, $0, CInt(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            }
        }
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
