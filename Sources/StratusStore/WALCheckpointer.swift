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
/// default, 1,000 pages), and a pool whose app turned automatic checkpoints off is left alone.
/// While the mirror imports or sends (``syncing``), the WAL may grow to ``syncThreshold`` pages
/// first: a sync rewrites the same B-tree pages of random-keyed tables in transaction after
/// transaction, and the WAL holds each rewrite, while a checkpoint copies each page once, so
/// checkpointing a long WAL copies a fraction of what checkpointing every 1,000 pages copies. When
/// the sync ends, a checkpoint copies the rest, and the writer's next commit starts the WAL over,
/// cutting the file to the threshold's size (`journal_size_limit`, unless the app set one). If the
/// background checkpoints fall behind (a reader holding an old snapshot stops them short), the
/// committing writer checkpoints itself at ``hardLimit``: the WAL stays bounded. A checkpoint here
/// never takes the write lock, so the app's writes never find the file busy because of it.
final class WALCheckpointer: TransactionObserver, Sendable {
    /// The WAL size, in pages, at which a checkpoint starts while a sync writes: 64 MiB of 4 KiB pages.
    static let syncThreshold: Int32 = 16_384

    /// The database file.
    private let path: String
    /// The WAL size, in pages, at which a checkpoint starts.
    private let threshold: Int32
    private let queue = DispatchQueue(label: "StratusStore.WALCheckpointer")
    /// The WAL size, in pages, at which the writer checkpoints in its commit.
    private let hardLimit: Int32
    /// Whether a checkpoint is scheduled on `queue` and has not started yet.
    private let scheduled = Atomic(false)
    private let isSyncing = Atomic(false)

    /// The checkpointer's connection, opened by its first checkpoint; only `queue` uses it.
    private let connection = Mutex<OpaquePointer?>(nil)

    private init(path: String, threshold: Int32) {
        self.path = path
        self.threshold = threshold
        hardLimit = max(threshold, Self.syncThreshold) * 2
    }

    /// Whether the mirror is importing or sending; the end of a sync checkpoints what it wrote.
    var syncing: Bool {
        get { isSyncing.load(ordering: .relaxed) }
        set {
            guard isSyncing.exchange(newValue, ordering: .relaxed), !newValue else { return }
            schedule()
        }
    }

    // The writer's connection holds its checkpointer until it closes: the checkpointer's own
    // connection closes with it.
    deinit {
        connection.withLock { connection in _ = sqlite3_close_v2(connection) }
    }

    /// Takes over the automatic checkpoints of `db`, the pool's writer connection; `nil` when the app
    /// turned them off, or the file is not in WAL mode.
    static func install(on db: Database) throws -> WALCheckpointer? {
        let threshold = Int32(try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") ?? 0)
        guard threshold > 0, try String.fetchOne(db, sql: "PRAGMA journal_mode")?.lowercased() == "wal",
            let path = sqlite3_db_filename(db.sqliteConnection, "main").map({ String(cString: $0) }), !path.isEmpty
        else { return nil }
        // A WAL that a sync grew is cut back when the writer starts it over after a checkpoint.
        if try Int.fetchOne(db, sql: "PRAGMA journal_size_limit") ?? 0 < 0 {
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            try db.execute(sql: "PRAGMA journal_size_limit = \(Int(threshold) * pageSize)")
        }
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
        return checkpointer
    }

    /// Called by SQLite on the writer after each commit, with the WAL's size in pages.
    private func walGrew(to pages: Int32, connection: OpaquePointer?, name: UnsafePointer<CChar>?) {
        guard pages >= (syncing ? max(threshold, Self.syncThreshold) : threshold) else { return }
        if pages >= hardLimit {
            sqlite3_wal_checkpoint_v2(connection, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        schedule()
    }

    /// Runs a checkpoint on the checkpointer's thread, unless one is scheduled already.
    private func schedule() {
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
