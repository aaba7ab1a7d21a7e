public import Foundation
public import GRDB

/// The app's own SQLite database, mirrored to a Stratus server: the app reads and writes its tables
/// with GRDB, and the store captures every change to the synced ones (``StoreModel``) in the same
/// transaction, with its author, for the mirror and for the app's own persistent history.
///
/// Open the store on the app's `DatabasePool` before writing to a synced table: the capture's
/// triggers need the functions the store registers on the pool's writer.
public final class StratusStore: Sendable {
    /// The author of writes made without ``write(author:_:)``: the app's own.
    public static let appAuthor = "app"
    /// The author of what the store applies from the server.
    public static let importAuthor = "import"

    /// The app's database.
    public let pool: DatabasePool
    /// The declared tables.
    public let model: StoreModel
    private let capture: ChangeCapture

    private init(pool: DatabasePool, model: StoreModel, capture: ChangeCapture) {
        self.pool = pool
        self.model = model
        self.capture = capture
    }

    /// Opens a store over `pool`: checks `model` against the tables and the rules of mirroring
    /// (throwing ``StoreModelError`` with every rule it breaks), then installs the change capture.
    public static func open(_ pool: DatabasePool, model: StoreModel) async throws -> StratusStore {
        let violations = try await pool.read { db in try StoreModelChecker.violations(of: model, in: db) }
        guard violations.isEmpty else { throw StoreModelError(violations: violations) }
        let capture = try await ChangeCapture.install(model, on: pool)
        return StratusStore(pool: pool, model: model, capture: capture)
    }

    /// Writes in one transaction, as `author`: the history records the author of each change, so
    /// that a consumer can skip its own writes (``history(after:excludingAuthors:limit:)``).
    public func write<T: Sendable>(
        author: String = StratusStore.appAuthor, _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        try await pool.write { [capture] db in try capture.writing(as: author) { try body(db) } }
    }

    /// The outbox: every row with a change the server has not confirmed, oldest entry first. Empty
    /// means everything written locally has been confirmed by the server.
    public func pendingChanges() async throws -> [PendingChange] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM stratusstore_outbox ORDER BY rowid").compactMap { row in
                guard let rowID = UUID.fromDatabaseValue(row["row_id"]),
                    let operation = PendingChange.Operation(rawValue: row["operation"])
                else { return nil }
                return PendingChange(
                    table: row["table_name"], rowID: rowID, operation: operation, version: row["version"],
                    storedKey: row["row_id"])
            }
        }
    }

    /// Removes outbox entries the server confirmed, each only if no change came after the version
    /// that was sent.
    public func confirm(_ changes: [PendingChange]) async throws {
        try await pool.write { db in
            for change in changes {
                try db.execute(
                    sql: "DELETE FROM stratusstore_outbox WHERE table_name = ? AND row_id = ? AND version = ?",
                    arguments: [change.table, change.storedKey, change.version])
            }
        }
    }

    /// The transactions that changed synced tables after `token` (from the first when `nil`), oldest
    /// first, at most `limit` of them looked at; those of `excludingAuthors` are left out but passed,
    /// so the page's token moves past them. Tokens are positions in the database: they survive
    /// restarts.
    public func history(
        after token: HistoryToken? = nil, excludingAuthors: Set<String> = [], limit: Int = 1_000
    ) async throws -> HistoryPage {
        try await pool.read { db in
            let transactions = try Row.fetchAll(
                db, sql: "SELECT id, author, time_ms FROM stratusstore_transactions WHERE id > ? ORDER BY id LIMIT ?",
                arguments: [token?.transaction ?? 0, max(1, limit)])
            guard let last = transactions.last?["id"] as Int64? else {
                return HistoryPage(transactions: [], token: token ?? HistoryToken(transaction: 0))
            }
            let kept = transactions.filter { !excludingAuthors.contains($0["author"] as String) }
            var changes: [Int64: [HistoryChange]] = [:]
            if let first = kept.first?["id"] as Int64? {
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT transaction_id, table_name, row_id, operation FROM stratusstore_changes
                        WHERE transaction_id BETWEEN ? AND ? ORDER BY seq
                        """, arguments: [first, last])
                {
                    guard let rowID = UUID.fromDatabaseValue(row["row_id"]),
                        let operation = HistoryChange.Operation(rawValue: row["operation"])
                    else { continue }
                    changes[row["transaction_id"], default: []].append(
                        HistoryChange(table: row["table_name"], rowID: rowID, operation: operation))
                }
            }
            return HistoryPage(
                transactions: kept.map { row in
                    let id: Int64 = row["id"]
                    return HistoryTransaction(
                        token: HistoryToken(transaction: id), author: row["author"],
                        date: Date(timeIntervalSince1970: Double(row["time_ms"] as Int64) / 1_000),
                        changes: changes[id] ?? [])
                }, token: HistoryToken(transaction: last))
        }
    }
}

/// A change of a row that the server has not confirmed yet.
public struct PendingChange: Sendable, Hashable {
    /// What the server is to do with the row's record.
    public enum Operation: String, Sendable {
        /// Save the row as it is now.
        case save
        /// Delete its record.
        case delete
    }

    public var table: String
    public var rowID: UUID
    public var operation: Operation
    /// Changes with every change of the row (and never repeats): a confirmation of an older version
    /// leaves the entry.
    public var version: Int64
    /// The key as the table stores it (16 bytes, or a string in either case).
    var storedKey: DatabaseValue
}

/// A position in the store's persistent history: after a transaction.
public struct HistoryToken: Sendable, Hashable, Codable {
    /// The number of the last transaction it is after.
    public var transaction: Int64
}

/// Transactions of the history, and the token to read on from.
public struct HistoryPage: Sendable, Equatable {
    public var transactions: [HistoryTransaction]
    /// After the last transaction looked at, included or not.
    public var token: HistoryToken
}

/// One transaction that changed synced tables.
public struct HistoryTransaction: Sendable, Equatable {
    /// The position after it.
    public var token: HistoryToken
    /// Who wrote it: ``StratusStore/appAuthor``, ``StratusStore/importAuthor``, or an app's own name.
    public var author: String
    public var date: Date
    /// Its changes, in the order they were made.
    public var changes: [HistoryChange]
}

/// One row changed by a transaction.
public struct HistoryChange: Sendable, Equatable {
    /// How the row changed.
    public enum Operation: String, Sendable {
        case insert, update, delete
    }

    public var table: String
    /// The row's primary key.
    public var rowID: UUID
    public var operation: Operation
}
