import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Moves the pool's WAL checkpoints off its writer: SQLite's automatic checkpoint runs inside the
/// commit that crossed the threshold, so that one write (the app's, an import's, an answer kept
/// after a send) waits while a few thousand pages are copied into the database file and it is
/// synced. Here the writer's commits only say how large the WAL grew, and a connection of the
/// checkpointer's own copies the WAL on a thread of its own, concurrently with the writer and the
/// readers (a passive checkpoint waits for neither).
///
/// The threshold is the writer's `wal_autocheckpoint` setting when the store opens (SQLite's
/// default, 1,000 pages): the WAL is checkpointed as often as before, and a pool whose app turned
/// automatic checkpoints off is left alone. If the background checkpoints fall behind (a reader
/// holding an old snapshot stops them short) and the WAL reaches ``backlogFactor`` times the
/// threshold, the committing writer checkpoints itself, as SQLite would have: the WAL stays bounded.
final class WALCheckpointer: TransactionObserver, Sendable {
    /// How far past its threshold the WAL may grow before the writer checkpoints in its commit.
    static let backlogFactor: Int32 = 16

    /// The database file.
    private let path: String
    /// The WAL size, in pages, at which a checkpoint starts.
    private let threshold: Int32
    private let queue = DispatchQueue(label: "StratusStore.WALCheckpointer")
    /// Whether a checkpoint is scheduled on `queue` and has not started yet.
    private let scheduled = Atomic(false)

    /// The checkpointer's connection, opened by its first checkpoint; only `queue` uses it.
    private let connection = Mutex<OpaquePointer?>(nil)

    private init(path: String, threshold: Int32) {
        self.path = path
        self.threshold = threshold
    }

    // The writer's connection holds its checkpointer until it closes: the checkpointer's own
    // connection closes with it.
    deinit {
        connection.withLock { connection in _ = sqlite3_close_v2(connection) }
    }

    /// Takes over the automatic checkpoints of `db`, the pool's writer connection, unless the app
    /// turned them off or the file is not in WAL mode.
    static func install(on db: Database) throws {
        let threshold = Int32(try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") ?? 0)
        guard threshold > 0, try String.fetchOne(db, sql: "PRAGMA journal_mode")?.lowercased() == "wal",
            let path = sqlite3_db_filename(db.sqliteConnection, "main").map({ String(cString: $0) }), !path.isEmpty
        else { return }
        let checkpointer = WALCheckpointer(path: path, threshold: threshold)
        // The connection holds its checkpointer for as long as it is open (as an observer that
        // observes nothing), and so for as long as SQLite may call the hook. Installing the hook
        // replaces SQLite's automatic checkpoint, and an earlier store's hook.
        db.add(transactionObserver: checkpointer, extent: .databaseLifetime)
        sqlite3_wal_hook(db.sqliteConnection, { context, connection, name, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
                .walGrew(to: pages, connection: connection, name: name)
            return SQLITE_OK
        }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// Called by SQLite on the writer after each commit, with the WAL's size in pages.
    private func walGrew(to pages: Int32, connection: OpaquePointer?, name: UnsafePointer<CChar>?) {
        guard pages >= threshold else { return }
        if pages >= threshold * Self.backlogFactor {
            sqlite3_wal_checkpoint_v2(connection, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            scheduled.store(false, ordering: .releasing)
            checkpoint()
        }
    }

    /// A passive checkpoint through the checkpointer's own connection.
    private func checkpoint() {
        connection.withLock { connection in
            if connection == nil {
                var opened: OpaquePointer?
                // A new connection knows the file is in WAL mode once it has read it.
                guard sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
                    sqlite3_exec(opened, "PRAGMA schema_version", nil, nil, nil) == SQLITE_OK
                else { return _ = sqlite3_close_v2(opened) }
                connection = opened
            }
            sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        }
    }

    // An observer of no event: the connection holds it, nothing more.
    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) {}
    func databaseDidRollback(_ db: Database) {}
}
