import GRDB

/// The versions of the store's own (`stratusstore_`) tables, applied by GRDB's `DatabaseMigrator`
/// when a store opens. Its identifiers start with `stratusstore.` and share `grdb_migrations` with
/// the app's own migrator, which applies only its own and leaves these alone (an app that asks its
/// migrator `hasBeenSuperseded` sees them as unknown: compare its `appliedIdentifiers` without
/// them). A change to the store's tables is a new migration appended here, never an edit of one
/// that shipped.
enum StoreMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // Immediate checks: a deferred check would run `PRAGMA foreign_key_check` over the app's
        // tables too, which are none of the store's business.
        migrator.registerMigration("stratusstore.1-tables", foreignKeyChecks: .immediate) { db in
            // A file made before the tables were versioned may hold an earlier layout of any of
            // them: each is brought to this one, its rows kept.
            try StoreMetadata.create(in: db)
            try ChangeCapture.createChangeLog(in: db)
            try ChangeCapture.createOutbox(in: db)
            // A file whose outbox earlier triggers kept has every change folded already.
            try StoreMetadata.startFolding(in: db)
        }
        migrator.registerMigration("stratusstore.2-refused-changes", foreignKeyChecks: .immediate) { db in
            try db.execute(
                sql: """
                    CREATE TABLE stratusstore_refused (
                        row_id TEXT PRIMARY KEY NOT NULL, table_name TEXT NOT NULL, code INTEGER NOT NULL,
                        reason TEXT NOT NULL, refused_at REAL NOT NULL) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("stratusstore.3-parked-rows", foreignKeyChecks: .immediate) { db in
            try db.execute(
                sql: """
                    CREATE TABLE stratusstore_parked (
                        user_name TEXT NOT NULL, table_name TEXT NOT NULL, row_id TEXT NOT NULL, operation TEXT NOT NULL,
                        row_values BLOB, system_fields BLOB, change_tag TEXT, ancestor BLOB, zone_name TEXT, owner_name TEXT,
                        PRIMARY KEY (user_name, row_id)) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("stratusstore.4-moved-records-kept", foreignKeyChecks: .immediate) { db in
            // The change tag and values of each record a moved row left behind, as this device
            // knew it: an edit another device made there later is merged into the row.
            try db.execute(
                sql: """
                    ALTER TABLE stratusstore_moved ADD COLUMN change_tag TEXT;
                    ALTER TABLE stratusstore_moved ADD COLUMN ancestor BLOB;
                    """)
        }
        return migrator
    }

    /// Applies the migrations `pool`'s file has not had.
    static func migrate(_ pool: DatabasePool) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            migrator.asyncMigrate(pool) { result in continuation.resume(with: result.map { _ in () }) }
        }
    }
}
