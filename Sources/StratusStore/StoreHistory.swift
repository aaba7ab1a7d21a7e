import Foundation
import GRDB

/// Deletes the store's history (`stratusstore_transactions` and `stratusstore_changes`) once
/// nothing needs it: the mirror needs a change only until it is folded into the outbox, and the
/// app only as long as it says (``StratusStore/open(_:model:mirroring:historyRetention:)``, or
/// ``StratusStore/deleteHistory(before:)`` like Core Data's persistent history purge).
///
/// The newest transaction and the newest change are never deleted: their numbers are where the
/// next ones count from (the tables have no `AUTOINCREMENT`), and a history token or the outbox's
/// fold mark must never meet a number again.
enum StoreHistory {
    /// Deletes the transactions up to `transaction` (a history token's) and their changes, folding
    /// the app's changes into the outbox first; returns how many transactions went.
    @discardableResult
    static func delete(upTo transaction: Int64, in db: GRDB.Database) throws -> Int {
        try StoreMetadata.fold(in: db)
        guard let newest = try Int64.fetchOne(db, sql: "SELECT max(id) FROM stratusstore_transactions") else { return 0 }
        let last = min(transaction, newest - 1)
        guard last > 0 else { return 0 }
        // A transaction's changes run from its first change to the next transaction's first.
        let keptFrom = try Int64.fetchOne(
            db, sql: "SELECT first_change FROM stratusstore_transactions WHERE id > ? ORDER BY id LIMIT 1", arguments: [last])
        if let keptFrom {
            try db.execute(
                sql: "DELETE FROM stratusstore_changes WHERE seq < ? AND seq < (SELECT max(seq) FROM stratusstore_changes)",
                arguments: [keptFrom])
        }
        try db.execute(sql: "DELETE FROM stratusstore_transactions WHERE id <= ?", arguments: [last])
        let deleted = db.changesCount
        try StoreMetadata.setValue(max(last, try deletedThrough(in: db)), for: deletedThroughKey, in: db)
        return deleted
    }

    private static let deletedThroughKey = "history_deleted_through"

    /// The last transaction deleted from the history; 0 when none was.
    static func deletedThrough(in db: GRDB.Database) throws -> Int64 {
        try StoreMetadata.value(deletedThroughKey, in: db).flatMap(Int64.fromDatabaseValue) ?? 0
    }

    /// Deletes the transactions committed up to `date` (to the millisecond, the history's
    /// precision: with no retention, one committed in the same millisecond goes too) and their changes.
    @discardableResult
    static func delete(upTo date: Date, in db: GRDB.Database) throws -> Int {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
        guard let last = try Int64.fetchOne(
            db, sql: "SELECT max(id) FROM stratusstore_transactions WHERE time_ms <= ?", arguments: [milliseconds])
        else { return 0 }
        return try delete(upTo: last, in: db)
    }

    /// Deletes the transactions older than `retention`, and their changes.
    @discardableResult
    static func delete(olderThan retention: Duration, in db: GRDB.Database) throws -> Int {
        let seconds = Double(retention.components.seconds) + Double(retention.components.attoseconds) * 1e-18
        return try delete(upTo: Date(timeIntervalSinceNow: -seconds), in: db)
    }
}
