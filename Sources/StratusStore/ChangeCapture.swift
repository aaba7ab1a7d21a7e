import Foundation
import GRDB
import Synchronization

/// Captures every write to a synced table in the same SQLite transaction, by triggers, into the
/// store's metadata tables (prefixed `stratusstore_`, out of the app's way): which transaction (with
/// its author and time) changed which row of which table, and how. Changes to local-only tables, and
/// updates of a synced table's local columns alone, are not captured.
///
/// The changes are the outbox's source: ``StoreMetadata`` folds the app's changes (not those of
/// ``StratusStore/importAuthor``, what came from the server) into `stratusstore_outbox`, one entry per
/// row, in batches, and reads changes not folded yet as entries too. The app's write thus appends to
/// one table in key order, instead of also updating an index keyed by random UUIDs; being written in
/// the app's own transaction, a change survives any crash that the write itself survives.
///
/// The triggers call two functions the store registers on the pool's writer connection: the
/// transaction's number and its author. A pool the store has not opened therefore cannot write to a
/// synced table (SQLite answers "no such function"): no write escapes capture.
final class ChangeCapture: Sendable {
    private struct State {
        /// The author of the transaction being written, set by ``StratusStore/write(author:_:)``.
        var author: String?
        /// The number of the transaction being written, once a trigger asked for it.
        var transaction: Int64?
    }

    private let state = Mutex(State())
    /// Runs the pool's WAL checkpoints off its writer; `nil` where the app turned them off.
    let checkpointer: WALCheckpointer?
    /// Called after each commit of a transaction that changed a synced table (the mirror picks up
    /// the new outbox entries then).
    let afterCapturedCommit = Mutex<(@Sendable () -> Void)?>(nil)

    private init(checkpointer: WALCheckpointer?) {
        self.checkpointer = checkpointer
    }

    /// Brings the store's own tables to this version's layout (``StoreMigrations``), creates the
    /// triggers of `model` (replacing earlier ones, so they follow
    /// the model's columns), and registers the functions they call on `pool`'s writer.
    static func install(_ model: StoreModel, on pool: DatabasePool) async throws -> ChangeCapture {
        try await StoreMigrations.migrate(pool)
        return try await pool.writeWithoutTransaction { db in
            try db.inTransaction {
                // Every earlier trigger goes, those of tables no longer in the model included.
                let earlier = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'stratusstore\\_%' ESCAPE '\\'")
                for name in earlier { try db.execute(sql: "DROP TRIGGER \(name.quotedDatabaseIdentifier)") }
                for table in model.syncedTables {
                    for trigger in try triggers(for: table, in: db) { try db.execute(sql: trigger) }
                }
                return .commit
            }
            try raisePageCache(in: db)
            let capture = ChangeCapture(checkpointer: try WALCheckpointer.install(on: db))
            // Called with the highest committed number, read under the write lock, so that numbers
            // follow the file, not this process's memory: another process writing the same file
            // continues the same sequence.
            db.add(function: DatabaseFunction("stratusstore_transaction", argumentCount: 1, pure: false) { values in
                capture.currentTransaction(after: Int64.fromDatabaseValue(values[0]) ?? 0)
            })
            db.add(function: DatabaseFunction("stratusstore_author", argumentCount: 0, pure: false) { _ in
                capture.currentAuthor()
            })
            db.add(transactionObserver: TransactionEnd(capture: capture), extent: .databaseLifetime)
            return capture
        }
    }

    /// The least page cache the store gives the pool's writer connection.
    static let writerPageCacheBytes = 16 << 20

    /// Raises the writer's page cache to ``writerPageCacheBytes`` unless the app made it larger: an
    /// import applies a thousand records in one transaction, and in SQLite's default cache (2 MB)
    /// their random-keyed B-tree pages spill into the WAL before the commit, some of them twice.
    private static func raisePageCache(in db: Database) throws {
        let setting = try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? 0
        let bytes = setting < 0 ? -setting * 1024 : setting * (try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096)
        guard bytes < writerPageCacheBytes else { return }
        try db.execute(sql: "PRAGMA cache_size = -\(writerPageCacheBytes / 1024)")
    }

    /// The change log: the transactions, each with its first change, and the changes in commit
    /// order. A change is one append to one B-tree: its number is the table's next row ID (changes
    /// are never deleted, so numbers never repeat without `AUTOINCREMENT`'s bookkeeping row), and a
    /// transaction's changes are found from its first change's number, with no index to update. A
    /// log of an earlier layout (an `AUTOINCREMENT` key and an index by transaction) is rebuilt in
    /// this one.
    static func createChangeLog(in db: Database) throws {
        let changes = """
            CREATE TABLE stratusstore_changes (
                seq INTEGER PRIMARY KEY, transaction_id INTEGER NOT NULL,
                table_name TEXT NOT NULL, row_id NOT NULL, operation TEXT NOT NULL)
            """
        guard try db.tableExists("stratusstore_changes") else {
            try db.execute(
                sql: """
                    CREATE TABLE stratusstore_transactions (
                        id INTEGER PRIMARY KEY, author TEXT NOT NULL, time_ms INTEGER NOT NULL, first_change INTEGER NOT NULL);
                    \(changes);
                    """)
            return
        }
        guard try !db.columns(in: "stratusstore_transactions").contains(where: { $0.name == "first_change" }) else { return }
        try db.execute(
            sql: """
                ALTER TABLE stratusstore_transactions ADD COLUMN first_change INTEGER NOT NULL DEFAULT 0;
                UPDATE stratusstore_transactions SET first_change = coalesce(
                    (SELECT min(seq) FROM stratusstore_changes WHERE transaction_id = stratusstore_transactions.id),
                    (SELECT coalesce(max(seq), 0) + 1 FROM stratusstore_changes));
                ALTER TABLE stratusstore_changes RENAME TO stratusstore_changes_earlier;
                \(changes);
                INSERT INTO stratusstore_changes SELECT seq, transaction_id, table_name, row_id, operation
                    FROM stratusstore_changes_earlier;
                DROP TABLE stratusstore_changes_earlier;
                """)
    }

    /// The outbox, keyed by row first (a UUID names one row of all synced tables, and the mirror
    /// looks entries up by it); a table of an earlier layout is rebuilt in this one.
    static func createOutbox(in db: Database) throws {
        let key = "PRIMARY KEY (row_id, table_name)"
        let definition = """
            CREATE TABLE stratusstore_outbox (
                table_name TEXT NOT NULL, row_id NOT NULL, operation TEXT NOT NULL, version INTEGER NOT NULL,
                \(key)) WITHOUT ROWID
            """
        guard let existing = try String.fetchOne(
            db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'stratusstore_outbox'")
        else { return try db.execute(sql: definition) }
        guard !existing.contains(key) else { return }
        try db.execute(sql: "ALTER TABLE stratusstore_outbox RENAME TO stratusstore_outbox_earlier")
        try db.execute(sql: definition)
        try db.execute(
            sql: """
                INSERT INTO stratusstore_outbox (table_name, row_id, operation, version)
                SELECT table_name, row_id, operation, version FROM stratusstore_outbox_earlier;
                DROP TABLE stratusstore_outbox_earlier;
                """)
    }

    static func triggerName(_ table: String, _ operation: String) -> String {
        "stratusstore_\(table)_\(operation)"
    }

    /// The transaction being written, once its row is in the log.
    private static let latestTransaction = "(SELECT max(id) FROM stratusstore_transactions)"
    /// Whether the transaction being written has no row in the log yet.
    private static let opensTransaction = "\(latestTransaction) IS NOT stratusstore_transaction(\(latestTransaction))"
    /// Adds the row of the transaction being written, by the current author.
    private static let transactionInsert = """
        INSERT INTO stratusstore_transactions (id, author, time_ms, first_change)
            VALUES (stratusstore_transaction(\(latestTransaction)), stratusstore_author(),
                CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
                (SELECT coalesce(max(seq), 0) + 1 FROM stratusstore_changes))
        """

    /// Logs, as the current author, changes of rows of `table` (each row's key and `insert`,
    /// `update` or `delete`), as its triggers would have had they been there when the rows were
    /// written.
    static func logChanges(
        into table: String, _ changes: [(key: DatabaseValue, operation: String)], in db: Database
    ) throws {
        guard !changes.isEmpty else { return }
        if try Bool.fetchOne(db, sql: "SELECT \(opensTransaction)") == true { try db.execute(sql: transactionInsert) }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO stratusstore_changes (transaction_id, table_name, row_id, operation)
                VALUES (\(latestTransaction), ?, ?, ?)
                """)
        for change in changes { try insert.execute(arguments: [table, change.key, change.operation]) }
    }

    /// The triggers of a synced table: for each of insert, update and delete, one that adds the
    /// transaction's row to the log when it has none yet, and one that logs the change.
    private static func triggers(for table: StoreTable, in db: Database) throws -> [String] {
        let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(\(table.name.quotedDatabaseIdentifier))")
        guard let key = columns.first(where: { ($0["pk"] as Int) > 0 }).map({ $0["name"] as String }) else { return [] }
        let synced = columns.map { $0["name"] as String }.filter { !table.localColumns.contains($0) }
        let name = table.name.quotedDatabaseIdentifier
        let literal = "'" + table.name.replacingOccurrences(of: "'", with: "''") + "'"
        let keyColumn = key.quotedDatabaseIdentifier
        let latest = latestTransaction
        // The transaction's row is added by a BEFORE trigger, which fires before the AFTER trigger
        // that appends the change, only when the transaction has no row yet (its number is one more
        // than the last committed one, so once its row is there it is the latest): added once, and
        // added again if a rolled-back savepoint took it. In the trigger's WHEN clause, not in an
        // `INSERT … SELECT … WHERE` reading the table it writes, which SQLite would materialize into
        // a temporary table at every row. A statement that then skips its row (`OR IGNORE` on a
        // conflict) can leave a transaction row without changes; the history leaves those out.
        let opensTransaction = Self.opensTransaction
        let transaction = Self.transactionInsert + ";"
        func change(_ row: String, _ operation: String, when condition: String? = nil) -> String {
            "INSERT INTO stratusstore_changes (transaction_id, table_name, row_id, operation) "
                + "SELECT \(latest), \(literal), \(row).\(keyColumn), \(operation)"
                + (condition.map { " WHERE \($0)" } ?? "") + ";"
        }
        // An update that writes every column (as a GRDB record's update does) changes nothing to
        // mirror unless a synced column's value differs.
        let changed = synced.map { "OLD.\($0.quotedDatabaseIdentifier) IS NOT NEW.\($0.quotedDatabaseIdentifier)" }
            .joined(separator: " OR ")
        let updateOf = "UPDATE OF \(synced.map(\.quotedDatabaseIdentifier).joined(separator: ", ")) ON \(name)"
        func trigger(_ operation: String, _ timing: String, _ event: String, when condition: String?, _ body: String) -> String {
            """
            CREATE TRIGGER \(triggerName(table.name, operation).quotedDatabaseIdentifier) \(timing) \(event)
            \(condition.map { "WHEN \($0) " } ?? "")BEGIN \(body) END
            """
        }
        return [
            trigger("insert_transaction", "BEFORE", "INSERT ON \(name)", when: opensTransaction, transaction),
            trigger("insert", "AFTER", "INSERT ON \(name)", when: nil, change("NEW", "'insert'")),
            trigger("update_transaction", "BEFORE", updateOf, when: "(\(changed)) AND \(opensTransaction)", transaction),
            trigger(
                "update", "AFTER", updateOf, when: changed,
                change("OLD", "'delete'", when: "OLD.\(keyColumn) IS NOT NEW.\(keyColumn)")
                    + change("NEW", "CASE WHEN OLD.\(keyColumn) IS NEW.\(keyColumn) THEN 'update' ELSE 'insert' END")),
            trigger("delete_transaction", "BEFORE", "DELETE ON \(name)", when: opensTransaction, transaction),
            trigger("delete", "AFTER", "DELETE ON \(name)", when: nil, change("OLD", "'delete'")),
        ]
    }

    /// Runs `body` with `author` as the author of what it writes.
    func writing<T>(as author: String, _ body: () throws -> T) rethrows -> T {
        state.withLock { $0.author = author }
        defer { state.withLock { $0.author = nil } }
        return try body()
    }

    private func currentTransaction(after committed: Int64) -> Int64 {
        state.withLock { state in
            if let transaction = state.transaction { return transaction }
            state.transaction = committed + 1
            return committed + 1
        }
    }

    private func currentAuthor() -> String {
        state.withLock { $0.author ?? StratusStore.appAuthor }
    }

    /// The number of the transaction being written, when it changed a synced table so far.
    func capturedTransaction() -> Int64? {
        state.withLock { $0.transaction }
    }

    /// The transaction ended: the next one asks for a number of its own.
    fileprivate func transactionEnded(committed: Bool) {
        let captured = state.withLock { state in
            defer { state.transaction = nil }
            return state.transaction != nil
        }
        if committed, captured, let action = afterCapturedCommit.withLock({ $0 }) { action() }
    }
}

/// Tells the capture when a transaction of the writer ends.
private final class TransactionEnd: TransactionObserver, @unchecked Sendable {
    // Only the writer connection calls it, serially.
    let capture: ChangeCapture

    init(capture: ChangeCapture) {
        self.capture = capture
    }

    // GRDB tells every observer of commits and rollbacks; no row event is needed.
    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { capture.transactionEnded(committed: true) }
    func databaseDidRollback(_ db: Database) { capture.transactionEnded(committed: false) }
}
