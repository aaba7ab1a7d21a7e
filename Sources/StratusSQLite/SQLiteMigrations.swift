import GRDB

/// The versioned schema of a Stratus SQLite database. Migrations run in order on open and are never
/// edited once released: a change is a new migration.
enum SQLiteMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: accounts, zones, records") { db in
            try db.execute(
                sql: """
                    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    CREATE TABLE containers (
                        id TEXT PRIMARY KEY, allows_sign_up INTEGER NOT NULL, created_ms INTEGER NOT NULL);
                    CREATE TABLE api_tokens (
                        token_hash TEXT PRIMARY KEY,
                        container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                        name TEXT NOT NULL, created_ms INTEGER NOT NULL);
                    CREATE TABLE users (
                        container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                        record_name TEXT NOT NULL, username TEXT NOT NULL, password_hash TEXT NOT NULL,
                        created_ms INTEGER NOT NULL,
                        PRIMARY KEY (container_id, record_name), UNIQUE (container_id, username));
                    CREATE TABLE sessions (
                        token_hash TEXT PRIMARY KEY, container_id TEXT NOT NULL, user_record_name TEXT NOT NULL,
                        expires_ms INTEGER NOT NULL);
                    CREATE TABLE databases (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        container_id TEXT NOT NULL, environment TEXT NOT NULL, scope TEXT NOT NULL, owner TEXT NOT NULL,
                        seq INTEGER NOT NULL DEFAULT 0, purged_seq INTEGER NOT NULL DEFAULT 0,
                        UNIQUE (container_id, environment, scope, owner));
                    CREATE TABLE zones (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        database_id INTEGER NOT NULL REFERENCES databases(id),
                        name TEXT NOT NULL,
                        seq INTEGER NOT NULL DEFAULT 0, purged_seq INTEGER NOT NULL DEFAULT 0,
                        change_seq INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
                        created_ms INTEGER NOT NULL, changed_ms INTEGER NOT NULL);
                    CREATE UNIQUE INDEX zones_live_name ON zones (database_id, name) WHERE deleted = 0;
                    CREATE INDEX zones_change_order ON zones (database_id, change_seq);
                    CREATE TABLE records (
                        zone_id INTEGER NOT NULL REFERENCES zones(id),
                        name TEXT NOT NULL, record_type TEXT NOT NULL, change_tag TEXT NOT NULL, fields BLOB NOT NULL,
                        created_ms INTEGER NOT NULL, created_by TEXT NOT NULL, created_device TEXT,
                        modified_ms INTEGER NOT NULL, modified_by TEXT NOT NULL, modified_device TEXT,
                        seq INTEGER NOT NULL, deleted INTEGER NOT NULL,
                        UNIQUE (zone_id, name));
                    CREATE INDEX records_change_order ON records (zone_id, seq);
                    CREATE INDEX records_tombstones ON records (modified_ms) WHERE deleted = 1;
                    """)
        }
        migrator.registerMigration("v2: enforced references") { db in
            try db.execute(
                sql: """
                    CREATE TABLE record_references (
                        zone_id INTEGER NOT NULL REFERENCES zones(id), source TEXT NOT NULL, target TEXT NOT NULL,
                        action TEXT NOT NULL, PRIMARY KEY (zone_id, source, target, action)) WITHOUT ROWID;
                    CREATE INDEX record_references_target ON record_references (zone_id, target, action);
                    """)
        }
        migrator.registerMigration("v3: schemas, the query index, assets") { db in
            // `value` has no declared type, so it keeps each value's own storage class: integers,
            // reals and text compare as the query layer expects (numbers numerically, text by bytes).
            // The index is one B-tree keyed for lookups; a record's entries are removed by key, from
            // the record's previous version, so no second index by record is kept up to date.
            try db.execute(
                sql: """
                    CREATE TABLE schemas (
                        container_id TEXT NOT NULL, environment TEXT NOT NULL, version INTEGER NOT NULL,
                        definition BLOB NOT NULL, PRIMARY KEY (container_id, environment));
                    CREATE TABLE record_index (
                        zone_id INTEGER NOT NULL, record_type TEXT NOT NULL, field TEXT NOT NULL, kind INTEGER NOT NULL,
                        value NOT NULL, longitude REAL, name TEXT NOT NULL,
                        PRIMARY KEY (zone_id, record_type, field, kind, value, name)) WITHOUT ROWID;
                    CREATE INDEX records_by_type ON records (zone_id, record_type, name) WHERE deleted = 0;
                    CREATE TABLE assets (
                        checksum TEXT PRIMARY KEY, size INTEGER NOT NULL, registered_ms INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE TABLE record_assets (
                        zone_id INTEGER NOT NULL, name TEXT NOT NULL, checksum TEXT NOT NULL,
                        PRIMARY KEY (zone_id, name, checksum)) WITHOUT ROWID;
                    CREATE INDEX record_assets_checksum ON record_assets (checksum);
                    """)
        }
        migrator.registerMigration("v4: subscriptions and push tokens") { db in
            try db.execute(
                sql: """
                    CREATE TABLE subscriptions (
                        container_id TEXT NOT NULL, environment TEXT NOT NULL, scope TEXT NOT NULL, owner TEXT NOT NULL,
                        subscriber TEXT NOT NULL, subscription_id TEXT NOT NULL, definition BLOB NOT NULL,
                        created_ms INTEGER NOT NULL,
                        PRIMARY KEY (container_id, environment, scope, owner, subscriber, subscription_id)) WITHOUT ROWID;
                    CREATE TABLE push_tokens (
                        token_hash TEXT PRIMARY KEY, container_id TEXT NOT NULL, environment TEXT NOT NULL,
                        user_record_name TEXT, device_id TEXT, created_ms INTEGER NOT NULL, used_ms INTEGER NOT NULL);
                    CREATE INDEX push_tokens_used ON push_tokens (used_ms);
                    """)
        }
        migrator.registerMigration("v5: finding people") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN email_address TEXT;
                    ALTER TABLE users ADD COLUMN discoverable INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE users ADD COLUMN given_name TEXT;
                    ALTER TABLE users ADD COLUMN family_name TEXT;
                    CREATE UNIQUE INDEX users_email ON users (container_id, email_address) WHERE email_address IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v6: server-to-server keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE server_keys (
                        key_id TEXT PRIMARY KEY,
                        container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                        environment TEXT NOT NULL, public_key TEXT NOT NULL, user_record_name TEXT NOT NULL,
                        created_ms INTEGER NOT NULL, revoked_ms INTEGER);
                    """)
        }
        migrator.registerMigration("v7: shares") { db in
            // Indexes of the share records (`ShareState`), written with them: which share a short
            // GUID names, and who takes part in which.
            try db.execute(
                sql: """
                    CREATE TABLE shares (
                        zone_id INTEGER NOT NULL, record_name TEXT NOT NULL, short_guid TEXT NOT NULL UNIQUE,
                        public_permission TEXT NOT NULL, PRIMARY KEY (zone_id, record_name)) WITHOUT ROWID;
                    CREATE TABLE share_participants (
                        zone_id INTEGER NOT NULL, record_name TEXT NOT NULL, user_record_name TEXT NOT NULL,
                        permission TEXT NOT NULL, status TEXT NOT NULL,
                        PRIMARY KEY (zone_id, record_name, user_record_name)) WITHOUT ROWID;
                    CREATE INDEX share_participants_user ON share_participants (user_record_name, status);
                    """)
        }
        migrator.registerMigration("v8: disabled users, the audit log") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN disabled_ms INTEGER;
                    CREATE INDEX sessions_user ON sessions (container_id, user_record_name);
                    CREATE TABLE audit_log (
                        id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL, actor TEXT NOT NULL,
                        action TEXT NOT NULL, status INTEGER NOT NULL);
                    """)
        }
        migrator.registerMigration("v9: records by type in the order they were written") { db in
            // Keyed by row ID (implicit after the columns), a new record's entry is appended, and a
            // record updated in place keeps its entry untouched. Keyed by name, as before, every
            // record named by UUID (as apps name them) cost a page read and write at a random place.
            try db.execute(
                sql: """
                    DROP INDEX records_by_type;
                    CREATE INDEX records_by_type ON records (zone_id, record_type) WHERE deleted = 0;
                    """)
        }
        migrator.registerMigration("v10: query index entries of equal values in creation order") { db in
            // Entries of one value (a search token, a flag, a parent reference: shared by many
            // records) were ordered by record name, and apps name records by UUID, so each new
            // record put an entry on a page at a random place in each such list. Ordered by the
            // record's creation time first, a new record's entries go at the lists' ends.
            try db.execute(
                sql: """
                    CREATE TABLE record_index_by_creation (
                        zone_id INTEGER NOT NULL, record_type TEXT NOT NULL, field TEXT NOT NULL, kind INTEGER NOT NULL,
                        value NOT NULL, longitude REAL, created_ms INTEGER NOT NULL, name TEXT NOT NULL,
                        PRIMARY KEY (zone_id, record_type, field, kind, value, created_ms, name)) WITHOUT ROWID;
                    INSERT INTO record_index_by_creation
                        SELECT i.zone_id, i.record_type, i.field, i.kind, i.value, i.longitude, r.created_ms, i.name
                        FROM record_index i JOIN records r ON r.zone_id = i.zone_id AND r.name = i.name;
                    DROP TABLE record_index;
                    ALTER TABLE record_index_by_creation RENAME TO record_index;
                    """)
        }
        migrator.registerMigration("v11: what accounts hold, uploads not yet held") { db in
            // What each account holds per zone, kept by record writes (``RecordWriteExecutor``): a
            // record counts for its database's owner, or in the public database for its creator.
            // Rows of records written before are counted here once.
            try db.execute(
                sql: """
                    CREATE TABLE account_usage (
                        zone_id INTEGER NOT NULL, account TEXT NOT NULL, records INTEGER NOT NULL,
                        record_bytes INTEGER NOT NULL, asset_bytes INTEGER NOT NULL,
                        PRIMARY KEY (zone_id, account)) WITHOUT ROWID;
                    CREATE INDEX account_usage_account ON account_usage (account);
                    INSERT INTO account_usage (zone_id, account, records, record_bytes, asset_bytes)
                        SELECT r.zone_id, CASE d.scope WHEN 'public' THEN r.created_by ELSE d.owner END,
                            count(*), sum(length(r.fields)), 0
                        FROM records r JOIN zones z ON z.id = r.zone_id JOIN databases d ON d.id = z.database_id
                        WHERE r.deleted = 0 GROUP BY 1, 2;
                    UPDATE account_usage SET asset_bytes = coalesce((
                        SELECT sum(a.size) FROM record_assets ra JOIN assets a ON a.checksum = ra.checksum
                            JOIN records r ON r.zone_id = ra.zone_id AND r.name = ra.name
                            JOIN zones z ON z.id = r.zone_id JOIN databases d ON d.id = z.database_id
                        WHERE ra.zone_id = account_usage.zone_id AND r.deleted = 0
                            AND CASE d.scope WHEN 'public' THEN r.created_by ELSE d.owner END = account_usage.account), 0);
                    CREATE TABLE uploads (
                        container_id TEXT NOT NULL, user_record_name TEXT NOT NULL, ticket TEXT NOT NULL,
                        checksum TEXT NOT NULL, size INTEGER NOT NULL, uploaded_ms INTEGER NOT NULL);
                    CREATE INDEX uploads_user ON uploads (container_id, user_record_name, uploaded_ms);
                    CREATE INDEX uploads_ticket ON uploads (ticket);
                    CREATE INDEX uploads_age ON uploads (uploaded_ms);
                    """)
        }
        migrator.registerMigration("v12: push endpoints of APNs, FCM and Web Push") { db in
            try db.execute(
                sql: """
                    CREATE TABLE push_endpoints (
                        endpoint_id TEXT PRIMARY KEY, container_id TEXT NOT NULL, environment TEXT NOT NULL,
                        user_record_name TEXT NOT NULL, device_id TEXT, channel TEXT NOT NULL, address TEXT NOT NULL,
                        public_key TEXT, auth_secret TEXT, created_ms INTEGER NOT NULL, used_ms INTEGER NOT NULL);
                    CREATE INDEX push_endpoints_owner ON push_endpoints (container_id, environment, user_record_name, used_ms);
                    CREATE INDEX push_endpoints_used ON push_endpoints (used_ms);
                    """)
        }
        migrator.registerMigration("v13: federated identities, single-use nonces") { db in
            // An identity provider's issuer and subject name one user of a container; nonces of the
            // ID tokens signed in with are claimed once, until they expire.
            try db.execute(
                sql: """
                    CREATE TABLE user_identities (
                        container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                        issuer TEXT NOT NULL, subject TEXT NOT NULL, provider TEXT NOT NULL,
                        user_record_name TEXT NOT NULL, email TEXT, email_verified INTEGER NOT NULL,
                        created_ms INTEGER NOT NULL, last_sign_in_ms INTEGER NOT NULL,
                        PRIMARY KEY (container_id, issuer, subject)) WITHOUT ROWID;
                    CREATE INDEX user_identities_user ON user_identities (container_id, user_record_name);
                    CREATE TABLE identity_nonces (nonce_key TEXT PRIMARY KEY, expires_ms INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE INDEX identity_nonces_expiry ON identity_nonces (expires_ms);
                    """)
        }
        return migrator
    }
}
