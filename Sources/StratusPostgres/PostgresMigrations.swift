import Foundation
import Logging
import PostgresNIO
import StratusModel

/// The versioned schema of a Stratus PostgreSQL database. Migrations run in order on start, in one
/// transaction, and are never edited once released: a change is a new migration.
///
/// Several instances may start at once against one database: an advisory lock held for the
/// duration of a migration run makes the others wait and then find nothing left to do.
enum PostgresMigrations {
    struct Migration {
        let version: Int
        let name: String
        let statements: [String]
    }

    /// The lock key every instance takes while migrating ("stratus" in ASCII).
    static let lockKey: Int64 = 0x7374_7261_7475_73

    /// Names compare by bytes (`COLLATE "C"`), as in SQLite: ordered listings, query ties and
    /// cursors agree across backends whatever the database's locale.
    static let all: [Migration] = [
        Migration(
            version: 1, name: "accounts, zones, records, references, schemas, the query index, assets",
            statements: [
                "CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL)",
                """
                CREATE TABLE containers (
                    id text COLLATE "C" PRIMARY KEY, allows_sign_up boolean NOT NULL, created_ms bigint NOT NULL)
                """,
                """
                CREATE TABLE api_tokens (
                    token_hash text PRIMARY KEY,
                    container_id text COLLATE "C" NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                    name text NOT NULL, created_ms bigint NOT NULL)
                """,
                """
                CREATE TABLE users (
                    container_id text COLLATE "C" NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                    record_name text COLLATE "C" NOT NULL, username text COLLATE "C" NOT NULL,
                    password_hash text NOT NULL, created_ms bigint NOT NULL,
                    PRIMARY KEY (container_id, record_name), UNIQUE (container_id, username))
                """,
                """
                CREATE TABLE sessions (
                    token_hash text PRIMARY KEY, container_id text COLLATE "C" NOT NULL,
                    user_record_name text COLLATE "C" NOT NULL, expires_ms bigint NOT NULL)
                """,
                """
                CREATE TABLE databases (
                    id bigserial PRIMARY KEY,
                    container_id text COLLATE "C" NOT NULL, environment text NOT NULL, scope text NOT NULL,
                    owner text COLLATE "C" NOT NULL,
                    seq bigint NOT NULL DEFAULT 0, purged_seq bigint NOT NULL DEFAULT 0,
                    UNIQUE (container_id, environment, scope, owner))
                """,
                """
                CREATE TABLE zones (
                    id bigserial PRIMARY KEY,
                    database_id bigint NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
                    name text COLLATE "C" NOT NULL,
                    seq bigint NOT NULL DEFAULT 0, purged_seq bigint NOT NULL DEFAULT 0,
                    change_seq bigint NOT NULL, deleted boolean NOT NULL DEFAULT false,
                    created_ms bigint NOT NULL, changed_ms bigint NOT NULL)
                """,
                "CREATE UNIQUE INDEX zones_live_name ON zones (database_id, name) WHERE NOT deleted",
                "CREATE INDEX zones_change_order ON zones (database_id, change_seq)",
                "CREATE INDEX zones_tombstones ON zones (changed_ms) WHERE deleted",
                """
                CREATE TABLE records (
                    zone_id bigint NOT NULL, name text COLLATE "C" NOT NULL, record_type text COLLATE "C" NOT NULL,
                    change_tag text NOT NULL, fields bytea NOT NULL,
                    created_ms bigint NOT NULL, created_by text NOT NULL, created_device text,
                    modified_ms bigint NOT NULL, modified_by text NOT NULL, modified_device text,
                    seq bigint NOT NULL, deleted boolean NOT NULL,
                    PRIMARY KEY (zone_id, name))
                """,
                "CREATE INDEX records_change_order ON records (zone_id, seq)",
                "CREATE INDEX records_tombstones ON records (modified_ms) WHERE deleted",
                "CREATE INDEX records_by_type ON records (zone_id, record_type, name) WHERE NOT deleted",
                """
                CREATE TABLE record_references (
                    zone_id bigint NOT NULL, source text COLLATE "C" NOT NULL, target text COLLATE "C" NOT NULL,
                    action text NOT NULL, PRIMARY KEY (zone_id, source, target, action))
                """,
                "CREATE INDEX record_references_target ON record_references (zone_id, target, action)",
                """
                CREATE TABLE schemas (
                    container_id text COLLATE "C" NOT NULL, environment text NOT NULL, version bigint NOT NULL,
                    definition bytea NOT NULL, PRIMARY KEY (container_id, environment))
                """,
                // A value is a number (integers exactly, reals by their shortest decimal, which keeps
                // their order) or a string; a field has one type, so the other column holds a constant.
                // `scalar` says which it was: 0 integer, 1 real, 2 string.
                """
                CREATE TABLE record_index (
                    zone_id bigint NOT NULL, record_type text COLLATE "C" NOT NULL, field text COLLATE "C" NOT NULL,
                    kind integer NOT NULL, number numeric NOT NULL, string text COLLATE "C" NOT NULL,
                    scalar integer NOT NULL, longitude double precision, name text COLLATE "C" NOT NULL,
                    PRIMARY KEY (zone_id, record_type, field, kind, number, string, name))
                """,
                """
                CREATE TABLE assets (
                    checksum text PRIMARY KEY, size bigint NOT NULL, registered_ms bigint NOT NULL)
                """,
                """
                CREATE TABLE record_assets (
                    zone_id bigint NOT NULL, name text COLLATE "C" NOT NULL, checksum text NOT NULL,
                    PRIMARY KEY (zone_id, name, checksum))
                """,
                "CREATE INDEX record_assets_checksum ON record_assets (checksum)",
                """
                CREATE TABLE subscriptions (
                    container_id text COLLATE "C" NOT NULL, environment text NOT NULL, scope text NOT NULL,
                    owner text COLLATE "C" NOT NULL, subscriber text COLLATE "C" NOT NULL,
                    subscription_id text COLLATE "C" NOT NULL, definition bytea NOT NULL, created_ms bigint NOT NULL,
                    PRIMARY KEY (container_id, environment, scope, owner, subscriber, subscription_id))
                """,
                """
                CREATE TABLE push_tokens (
                    token_hash text PRIMARY KEY, container_id text COLLATE "C" NOT NULL, environment text NOT NULL,
                    user_record_name text, device_id text, created_ms bigint NOT NULL, used_ms bigint NOT NULL)
                """,
                "CREATE INDEX push_tokens_used ON push_tokens (used_ms)",
            ]),
        Migration(
            version: 2, name: "messages between instances",
            statements: [
                // Messages too large for a NOTIFY payload wait here for the other instances.
                """
                CREATE TABLE instance_messages (
                    id bigserial PRIMARY KEY, payload bytea NOT NULL, created_ms bigint NOT NULL)
                """,
                "CREATE INDEX instance_messages_age ON instance_messages (created_ms)",
            ]),
        Migration(
            version: 3, name: "finding people",
            statements: [
                "ALTER TABLE users ADD COLUMN email_address text COLLATE \"C\"",
                "ALTER TABLE users ADD COLUMN discoverable boolean NOT NULL DEFAULT false",
                "ALTER TABLE users ADD COLUMN given_name text",
                "ALTER TABLE users ADD COLUMN family_name text",
                "CREATE UNIQUE INDEX users_email ON users (container_id, email_address) WHERE email_address IS NOT NULL",
            ]),
        Migration(
            version: 4, name: "server-to-server keys",
            statements: [
                """
                CREATE TABLE server_keys (
                    key_id text COLLATE "C" PRIMARY KEY,
                    container_id text COLLATE "C" NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                    environment text NOT NULL, public_key text NOT NULL, user_record_name text COLLATE "C" NOT NULL,
                    created_ms bigint NOT NULL, revoked_ms bigint)
                """,
            ]),
        Migration(
            version: 5, name: "shares",
            statements: [
                """
                CREATE TABLE shares (
                    zone_id bigint NOT NULL, record_name text COLLATE "C" NOT NULL,
                    short_guid text COLLATE "C" NOT NULL UNIQUE, public_permission text NOT NULL,
                    PRIMARY KEY (zone_id, record_name))
                """,
                """
                CREATE TABLE share_participants (
                    zone_id bigint NOT NULL, record_name text COLLATE "C" NOT NULL,
                    user_record_name text COLLATE "C" NOT NULL, permission text NOT NULL, status text NOT NULL,
                    PRIMARY KEY (zone_id, record_name, user_record_name))
                """,
                "CREATE INDEX share_participants_user ON share_participants (user_record_name, status)",
            ]),
        Migration(
            version: 6, name: "disabled users, the audit log",
            statements: [
                "ALTER TABLE users ADD COLUMN disabled_ms bigint",
                "CREATE INDEX sessions_user ON sessions (container_id, user_record_name)",
                """
                CREATE TABLE audit_log (
                    id bigserial PRIMARY KEY, time_ms bigint NOT NULL, actor text NOT NULL, action text NOT NULL,
                    status integer NOT NULL)
                """,
            ]),
        Migration(
            version: 7, name: "locking a zone and reading its records in one round trip",
            statements: [
                // Arguments: container, environment, scope, owner, zone name, record names. Locks the
                // live zone's row (writers of a zone take turns on it) and answers its counters, the
                // environment's schema version and the named records, one row each, or one row with
                // no record. A volatile function takes a new snapshot for each statement, so the
                // records are read after the lock is granted, as the writer before committed them;
                // one statement would read them from before its wait. No row: no such live zone.
                """
                CREATE FUNCTION stratus_lock_zone_for_writing(text, text, text, text, text, text[])
                RETURNS TABLE (
                    zone_id bigint, zone_seq bigint, zone_purged_seq bigint, database_id bigint,
                    schema_version bigint, name text, record_type text, change_tag text, fields bytea,
                    created_ms bigint, created_by text, created_device text, modified_ms bigint,
                    modified_by text, modified_device text, seq bigint, deleted boolean)
                LANGUAGE plpgsql VOLATILE AS $function$
                #variable_conflict use_column
                DECLARE
                    locked record;
                BEGIN
                    SELECT z.id, z.seq, z.purged_seq, z.database_id INTO locked
                    FROM zones z JOIN databases d ON d.id = z.database_id
                    WHERE d.container_id = $1 AND d.environment = $2 AND d.scope = $3 AND d.owner = $4
                        AND z.name = $5 AND NOT z.deleted
                    FOR UPDATE OF z;
                    IF NOT FOUND THEN
                        RETURN;
                    END IF;
                    RETURN QUERY
                    SELECT locked.id, locked.seq, locked.purged_seq, locked.database_id,
                        (SELECT s.version FROM schemas s WHERE s.container_id = $1 AND s.environment = $2),
                        r.name::text, r.record_type::text, r.change_tag, r.fields, r.created_ms, r.created_by,
                        r.created_device, r.modified_ms, r.modified_by, r.modified_device, r.seq, r.deleted
                    FROM (VALUES (1)) AS one (n)
                    LEFT JOIN records r ON r.zone_id = locked.id AND r.name = ANY($6);
                END
                $function$
                """,
            ]),
        Migration(
            version: 8, name: "records by type in the order they were written",
            statements: [
                // Without the name in the key, a new record's entry goes after its type's others (ties
                // are ordered by the row's place in the table): no page at a random place per record
                // named by UUID, as apps name them.
                "DROP INDEX records_by_type",
                "CREATE INDEX records_by_type ON records (zone_id, record_type) WHERE NOT deleted",
            ]),
        Migration(
            version: 9, name: "query index entries of equal values in creation order",
            statements: [
                // Entries of one value (a search token, a flag, a parent reference: shared by many
                // records) were ordered by record name, and apps name records by UUID, so each new
                // record put an entry at a random place in each such list; ordered by the record's
                // creation time first, they go at the lists' ends, as in SQLite.
                "ALTER TABLE record_index ADD COLUMN created_ms bigint",
                """
                UPDATE record_index i SET created_ms = r.created_ms FROM records r
                WHERE r.zone_id = i.zone_id AND r.name = i.name
                """,
                "DELETE FROM record_index WHERE created_ms IS NULL",
                "ALTER TABLE record_index ALTER COLUMN created_ms SET NOT NULL",
                "ALTER TABLE record_index DROP CONSTRAINT record_index_pkey",
                "ALTER TABLE record_index ADD PRIMARY KEY (zone_id, record_type, field, kind, number, string, created_ms, name)",
            ]),
        Migration(
            version: 10, name: "what accounts hold, uploads not yet held",
            statements: [
                // What each account holds per zone, kept by record writes (``RecordWriteExecutor``): a
                // record counts for its database's owner, or in the public database for its creator.
                // Rows of records written before are counted here once.
                """
                CREATE TABLE account_usage (
                    zone_id bigint NOT NULL, account text COLLATE "C" NOT NULL, records bigint NOT NULL,
                    record_bytes bigint NOT NULL, asset_bytes bigint NOT NULL, PRIMARY KEY (zone_id, account))
                """,
                "CREATE INDEX account_usage_account ON account_usage (account)",
                """
                INSERT INTO account_usage (zone_id, account, records, record_bytes, asset_bytes)
                SELECT r.zone_id, CASE d.scope WHEN 'public' THEN r.created_by ELSE d.owner END,
                    count(*), sum(octet_length(r.fields)), 0
                FROM records r JOIN zones z ON z.id = r.zone_id JOIN databases d ON d.id = z.database_id
                WHERE NOT r.deleted GROUP BY 1, 2
                """,
                """
                UPDATE account_usage u SET asset_bytes = held.bytes FROM (
                    SELECT ra.zone_id, CASE d.scope WHEN 'public' THEN r.created_by ELSE d.owner END AS account,
                        sum(a.size) AS bytes
                    FROM record_assets ra JOIN assets a ON a.checksum = ra.checksum
                        JOIN records r ON r.zone_id = ra.zone_id AND r.name = ra.name
                        JOIN zones z ON z.id = r.zone_id JOIN databases d ON d.id = z.database_id
                    WHERE NOT r.deleted GROUP BY 1, 2) held
                WHERE u.zone_id = held.zone_id AND u.account = held.account
                """,
                """
                CREATE TABLE uploads (
                    container_id text COLLATE "C" NOT NULL, user_record_name text COLLATE "C" NOT NULL,
                    ticket text NOT NULL, checksum text NOT NULL, size bigint NOT NULL, uploaded_ms bigint NOT NULL)
                """,
                "CREATE INDEX uploads_user ON uploads (container_id, user_record_name, uploaded_ms)",
                "CREATE INDEX uploads_ticket ON uploads (ticket)",
                "CREATE INDEX uploads_age ON uploads (uploaded_ms)",
            ]),
        Migration(
            version: 11, name: "push endpoints of APNs, FCM and Web Push",
            statements: [
                """
                CREATE TABLE push_endpoints (
                    endpoint_id text PRIMARY KEY, container_id text COLLATE "C" NOT NULL, environment text NOT NULL,
                    user_record_name text COLLATE "C" NOT NULL, device_id text, channel text NOT NULL,
                    address text NOT NULL, public_key text, auth_secret text, created_ms bigint NOT NULL,
                    used_ms bigint NOT NULL)
                """,
                "CREATE INDEX push_endpoints_owner ON push_endpoints (container_id, environment, user_record_name, used_ms)",
                "CREATE INDEX push_endpoints_used ON push_endpoints (used_ms)",
            ]),
        Migration(
            version: 12, name: "federated identities, single-use nonces",
            statements: [
                // An identity provider's issuer and subject name one user of a container; nonces of
                // the ID tokens signed in with are claimed once, until they expire.
                """
                CREATE TABLE user_identities (
                    container_id text COLLATE "C" NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
                    issuer text COLLATE "C" NOT NULL, subject text COLLATE "C" NOT NULL, provider text NOT NULL,
                    user_record_name text COLLATE "C" NOT NULL, email text COLLATE "C", email_verified boolean NOT NULL,
                    created_ms bigint NOT NULL, last_sign_in_ms bigint NOT NULL,
                    PRIMARY KEY (container_id, issuer, subject))
                """,
                "CREATE INDEX user_identities_user ON user_identities (container_id, user_record_name)",
                "CREATE TABLE identity_nonces (nonce_key text PRIMARY KEY, expires_ms bigint NOT NULL)",
                "CREATE INDEX identity_nonces_expiry ON identity_nonces (expires_ms)",
            ]),
    ]

    /// The latest version this build knows.
    static var latestVersion: Int { all.last?.version ?? 0 }

    /// Applies the migrations the database lacks; returns the versions applied.
    @discardableResult
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        try await connection.run("BEGIN", logger: logger)
        do {
            let done = try await apply(connection, logger: logger)
            try await connection.run("COMMIT", logger: logger)
            return done
        } catch {
            _ = try? await connection.run("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Applies the missing migrations inside the caller's transaction, under an advisory lock that
    /// instances starting together take in turn.
    private static func apply(_ connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        try await connection.run("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
        try await connection.run(
            """
            CREATE TABLE IF NOT EXISTS stratus_migrations (
                version integer PRIMARY KEY, name text NOT NULL, applied_ms bigint NOT NULL)
            """, logger: logger)
        var applied: Set<Int> = []
        for try await version in try await connection.run(
            "SELECT version FROM stratus_migrations", logger: logger
        ).decode(Int.self) {
            applied.insert(version)
        }
        var done: [Int] = []
        for migration in all where !applied.contains(migration.version) {
            for statement in migration.statements {
                try await connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            let now = Timestamp.now.milliseconds
            try await connection.run(
                """
                INSERT INTO stratus_migrations (version, name, applied_ms)
                VALUES (\(migration.version), \(migration.name), \(now))
                """, logger: logger)
            done.append(migration.version)
        }
        return done
    }
}
