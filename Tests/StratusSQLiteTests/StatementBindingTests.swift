import Foundation
import GRDB
@testable import StratusSQLite
import Testing

/// The write path's statements bound through SQLite's C API (`Statement+Binding.swift`) rather than
/// GRDB's argument arrays: what they bind must be what GRDB would have bound, and their failures
/// SQLite's own.
@Suite("Statements bound through SQLite's C API")
struct StatementBindingTests {
    @Test("every value type binds in order and reads back; a failed run throws SQLite's error and the statement runs again")
    func bindAndRun() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, data BLOB, score REAL, flag INTEGER, note TEXT)
                """)
            let insert = try db.cachedStatement(sql: "INSERT INTO t (id, name, data, score, flag, note) VALUES (?, ?, ?, ?, ?, ?)")
            try insert.run(Int64(1), "a", Data([0, 1, 2]), 2.5, true, String?.none)
            try insert.run(Int64(2), "b ✓", Data([7]), -1.0, false, Optional("x"))
            let duplicate = #expect(throws: DatabaseError.self) {
                try insert.run(Int64(3), "a", Data([8]), 0.0, false, String?.none)
            }
            #expect(duplicate?.resultCode == .SQLITE_CONSTRAINT)
            try insert.run(Int64(3), "c", Data([9]), 0.0, false, String?.none)

            let rows = try Row.fetchAll(db, sql: "SELECT * FROM t ORDER BY id")
            #expect(rows.map { $0["name"] as String } == ["a", "b ✓", "c"])
            #expect(rows[0]["data"] as Data == Data([0, 1, 2]))
            #expect(rows[0]["score"] as Double == 2.5 && rows[1]["score"] as Double == -1.0)
            #expect(rows[0]["flag"] as Int64 == 1 && rows[1]["flag"] as Int64 == 0)
            #expect(rows[0]["note"] as String? == nil && rows[1]["note"] as String? == "x")
        }
    }

    @Test("text binds whole, with its length: a NUL inside it is kept and compared, and empty text is not NULL")
    func textWithItsLength() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            let insert = try db.cachedStatement(sql: "INSERT INTO t (id, name) VALUES (?, ?)")
            try insert.run(Int64(1), "victim")
            try insert.run(Int64(2), "")
            try insert.run(Int64(3), "é ✓")
            let find = try db.cachedStatement(sql: "SELECT id FROM t WHERE name = ?")
            #expect(try find.firstInteger("victim\u{0}zzz") == nil, "bound as a C string, it would find victim")
            #expect(try find.firstInteger("victim") == 1)
            #expect(try find.firstInteger("") == 2)
            #expect(try find.firstInteger("é ✓") == 3)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t WHERE name IS NULL") == 0)
        }
    }

    @Test("bytes bind as a BLOB, and no bytes as an empty BLOB, not NULL")
    func blobs() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            let insert = try db.cachedStatement(sql: "INSERT INTO t (id, data) VALUES (?, ?)")
            try insert.run(Int64(1), BlobBinding(Array(#"{"a":{"value":1}}"#.utf8)))
            try insert.run(Int64(2), BlobBinding([]))
            let rows = try Row.fetchAll(db, sql: "SELECT data, typeof(data) AS type FROM t ORDER BY id")
            #expect(rows[0]["data"] as Data == Data(#"{"a":{"value":1}}"#.utf8))
            #expect(rows.map { $0["type"] as String } == ["blob", "blob"])
            #expect(rows[1]["data"] as Data == Data())
        }
    }

    @Test("the first integer of the first row, or nil without a row; the statement is reset between uses")
    func firstInteger() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'b')")
            let find = try db.cachedStatement(sql: "SELECT id FROM t WHERE name = ? ORDER BY id")
            #expect(try find.firstInteger("b") == 2)
            #expect(try find.firstInteger("none") == nil)
            #expect(try find.firstInteger("a") == 1)
            // RETURNING: the update happens on the first step, once.
            try db.execute(sql: "CREATE TABLE counter (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL)")
            try db.execute(sql: "INSERT INTO counter VALUES (1, 0)")
            let next = try db.cachedStatement(sql: "UPDATE counter SET seq = seq + 1 WHERE id = ? RETURNING seq")
            #expect(try next.firstInteger(Int64(1)) == 1)
            #expect(try next.firstInteger(Int64(1)) == 2)
            #expect(try Int64.fetchOne(db, sql: "SELECT seq FROM counter") == 2)
        }
    }
}
