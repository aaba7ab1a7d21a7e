import Foundation
import GRDB
import GRDBSQLite
import StratusModel
public import StratusStorage
import Synchronization

/// The ``AccountStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Containers, tokens, users, sessions

    public func createContainer(_ container: ContainerInfo) async throws {
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM containers WHERE id = ?", arguments: [container.identifier])
                != nil
            {
                throw StratusError(.exists, "container '\(container.identifier)' already exists")
            }
            try db.execute(
                sql: "INSERT INTO containers (id, allows_sign_up, created_ms) VALUES (?, ?, ?)",
                arguments: [container.identifier, container.allowsSignUp, container.createdAt])
        }
    }

    public func container(_ identifier: String) async throws -> ContainerInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM containers WHERE id = ?", arguments: [identifier])
                .map(Self.containerInfo)
        }
    }

    public func containers() async throws -> [ContainerInfo] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM containers ORDER BY id").map(Self.containerInfo)
        }
    }

    static func containerInfo(_ row: Row) -> ContainerInfo {
        ContainerInfo(identifier: row["id"], allowsSignUp: row["allows_sign_up"], createdAt: row["created_ms"])
    }

    public func createAPIToken(hash: String, container: String, name: String, createdAt: Int64) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, container)
            try db.execute(
                sql: "INSERT INTO api_tokens (token_hash, container_id, name, created_ms) VALUES (?, ?, ?, ?)",
                arguments: [hash, container, name, createdAt])
        }
    }

    public func containerForAPIToken(hash: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT container_id FROM api_tokens WHERE token_hash = ?", arguments: [hash])
        }
    }

    public func deleteAPIToken(hash: String, container: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM api_tokens WHERE token_hash = ? AND container_id = ?", arguments: [hash, container])
            return db.changesCount == 1
        }
    }

    public func createUser(_ user: UserInfo) async throws {
        try await pool.write { db in try Self.insertUser(db, user) }
    }

    /// Inserts a user: `NOT_FOUND` without their container, `EXISTS` when the username or the
    /// e-mail address is taken in it.
    static func insertUser(_ db: Database, _ user: UserInfo) throws {
        try requireContainer(db, user.container)
        if try Bool.fetchOne(
            db, sql: "SELECT 1 FROM users WHERE container_id = ? AND username = ?",
            arguments: [user.container, user.username]) != nil
        {
            throw StratusError(.exists, "username '\(user.username)' is taken")
        }
        if let address = user.emailAddress?.lowercased(),
            try Bool.fetchOne(
                db, sql: "SELECT 1 FROM users WHERE container_id = ? AND email_address = ?",
                arguments: [user.container, address]) != nil
        {
            throw StratusError(.exists, "another user of the container has the e-mail address '\(address)'")
        }
        try db.execute(
            sql: """
                INSERT INTO users (
                    container_id, record_name, username, password_hash, created_ms, email_address, discoverable,
                    given_name, family_name, disabled_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                user.container, user.recordName, user.username, user.passwordHash, user.createdAt,
                user.emailAddress?.lowercased(), user.discoverable, user.givenName, user.familyName, user.disabledAt,
            ])
    }

    public func user(container: String, username: String) async throws -> UserInfo? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM users WHERE container_id = ? AND username = ?", arguments: [container, username]
            ).map(Self.userInfo)
        }
    }

    public func user(container: String, recordName: String) async throws -> UserInfo? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM users WHERE container_id = ? AND record_name = ?",
                arguments: [container, recordName]
            ).map(Self.userInfo)
        }
    }

    public func user(container: String, emailAddress: String) async throws -> UserInfo? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM users WHERE container_id = ? AND email_address = ?",
                arguments: [container, emailAddress.lowercased()]
            ).map(Self.userInfo)
        }
    }

    public func setEmailAddress(_ emailAddress: String?, container: String, recordName: String) async throws {
        let address = emailAddress?.lowercased()
        try await pool.write { db in
            if let address,
                let holder = try String.fetchOne(
                    db, sql: "SELECT record_name FROM users WHERE container_id = ? AND email_address = ?",
                    arguments: [container, address]), holder != recordName
            {
                throw StratusError(.exists, "another user of the container has the e-mail address '\(address)'")
            }
            try db.execute(
                sql: "UPDATE users SET email_address = ? WHERE container_id = ? AND record_name = ?",
                arguments: [address, container, recordName])
            guard db.changesCount == 1 else { throw StratusError(.notFound, "user '\(recordName)' does not exist") }
        }
    }

    public func setDiscoverability(
        _ discoverable: Bool, givenName: String?, familyName: String?, container: String, recordName: String
    ) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE users SET discoverable = ?, given_name = ?, family_name = ?
                    WHERE container_id = ? AND record_name = ?
                    """,
                arguments: [discoverable, givenName, familyName, container, recordName])
            guard db.changesCount == 1 else { throw StratusError(.notFound, "user '\(recordName)' does not exist") }
        }
    }

    public func createServerKey(_ key: ServerKeyInfo) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, key.container)
            try db.execute(
                sql: """
                    INSERT INTO server_keys (
                        key_id, container_id, environment, public_key, user_record_name, created_ms, revoked_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key.keyID, key.container, key.environment.rawValue, key.publicKeyPEM, key.userRecordName, key.createdAt,
                    key.revokedAt,
                ])
        }
    }

    public func serverKey(id: String) async throws -> ServerKeyInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM server_keys WHERE key_id = ?", arguments: [id]).map(Self.serverKeyInfo)
        }
    }

    public func serverKeys(container: String) async throws -> [ServerKeyInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM server_keys WHERE container_id = ? ORDER BY created_ms, key_id",
                arguments: [container]
            ).map(Self.serverKeyInfo)
        }
    }

    public func revokeServerKey(id: String, container: String, at timestamp: Int64) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE server_keys SET revoked_ms = coalesce(revoked_ms, ?) WHERE key_id = ? AND container_id = ?
                    """,
                arguments: [timestamp, id, container])
            return db.changesCount == 1
        }
    }

    static func serverKeyInfo(_ row: Row) -> ServerKeyInfo {
        ServerKeyInfo(
            keyID: row["key_id"], container: row["container_id"],
            environment: ContainerEnvironment(rawValue: row["environment"]) ?? .development,
            publicKeyPEM: row["public_key"], userRecordName: row["user_record_name"], createdAt: row["created_ms"],
            revokedAt: row["revoked_ms"])
    }

    static func userInfo(_ row: Row) -> UserInfo {
        UserInfo(
            container: row["container_id"], recordName: row["record_name"], username: row["username"],
            passwordHash: row["password_hash"], createdAt: row["created_ms"], emailAddress: row["email_address"],
            discoverable: row["discoverable"], givenName: row["given_name"], familyName: row["family_name"],
            disabledAt: row["disabled_ms"])
    }

    static func requireContainer(_ db: Database, _ container: String) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM containers WHERE id = ?", arguments: [container]) != nil else {
            throw StratusError(.notFound, "container '\(container)' does not exist")
        }
    }

    public func createSession(hash: String, session: SessionInfo, passwordHash: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO sessions (token_hash, container_id, user_record_name, expires_ms)
                    SELECT ?, ?, ?, ? FROM users
                    WHERE container_id = ? AND record_name = ? AND disabled_ms IS NULL AND password_hash = ?
                    """,
                arguments: [
                    hash, session.container, session.userRecordName, session.expiresAt, session.container,
                    session.userRecordName, passwordHash,
                ])
            return db.changesCount == 1
        }
    }

    public func session(hash: String) async throws -> SessionInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE token_hash = ?", arguments: [hash]).map { row in
                SessionInfo(
                    container: row["container_id"], userRecordName: row["user_record_name"],
                    expiresAt: row["expires_ms"])
            }
        }
    }

    public func deleteSession(hash: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE token_hash = ?", arguments: [hash])
        }
    }

    public func setUserDisabled(_ disabled: Bool, container: String, recordName: String, at timestamp: Int64) async throws
        -> [String]
    {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE users SET disabled_ms = ? WHERE container_id = ? AND record_name = ?",
                arguments: [disabled ? timestamp : nil, container, recordName])
            guard db.changesCount == 1 else { throw Self.noSuchUser(container, recordName) }
            return disabled ? try Self.endSessions(db, container: container, recordName: recordName) : []
        }
    }

    public func setPasswordHash(_ hash: String, container: String, recordName: String) async throws -> [String] {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE users SET password_hash = ? WHERE container_id = ? AND record_name = ?",
                arguments: [hash, container, recordName])
            guard db.changesCount == 1 else { throw Self.noSuchUser(container, recordName) }
            return try Self.endSessions(db, container: container, recordName: recordName)
        }
    }

    public func endSessions(container: String, recordName: String) async throws -> [String] {
        try await pool.write { db in try Self.endSessions(db, container: container, recordName: recordName) }
    }

    public func setUsernameAndPassword(username: String, passwordHash: String, container: String, recordName: String)
        async throws
    {
        try await pool.write { db in
            if let holder = try String.fetchOne(
                db, sql: "SELECT record_name FROM users WHERE container_id = ? AND username = ?",
                arguments: [container, username]), holder != recordName
            {
                throw StratusError(.exists, "username '\(username)' is taken")
            }
            try db.execute(
                sql: "UPDATE users SET username = ?, password_hash = ? WHERE container_id = ? AND record_name = ?",
                arguments: [username, passwordHash, container, recordName])
            guard db.changesCount == 1 else { throw Self.noSuchUser(container, recordName) }
        }
    }

    public func deleteUser(container: String, recordName: String) async throws -> [String] {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM users WHERE container_id = ? AND record_name = ?", arguments: [container, recordName])
            guard db.changesCount == 1 else { throw Self.noSuchUser(container, recordName) }
            let hashes = try Self.endSessions(db, container: container, recordName: recordName)
            // Their own databases in both environments (the private one, and a shared one's default
            // zone if it was ever made), whole: no tombstone is left, as no device of theirs reads it.
            let arguments: StatementArguments = [container, recordName, DatabaseScope.public.rawValue]
            let databases = "SELECT id FROM databases WHERE container_id = ? AND owner = ? AND scope != ?"
            try Self.deleteContents(
                ofZones: "SELECT id FROM zones WHERE database_id IN (\(databases))", arguments: arguments, db)
            try db.execute(sql: "DELETE FROM zones WHERE database_id IN (\(databases))", arguments: arguments)
            try db.execute(sql: "DELETE FROM databases WHERE container_id = ? AND owner = ? AND scope != ?", arguments: arguments)
            // Their place in other users' shares: the index the shares' participants are reached by.
            try db.execute(
                sql: """
                    DELETE FROM share_participants WHERE user_record_name = ? AND zone_id IN (
                        SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                        WHERE databases.container_id = ?)
                    """,
                arguments: [recordName, container])
            let user: StatementArguments = [container, recordName]
            try db.execute(
                sql: "DELETE FROM subscriptions WHERE container_id = ? AND (subscriber = ? OR owner = ?)",
                arguments: [container, recordName, recordName])
            try db.execute(sql: "DELETE FROM uploads WHERE container_id = ? AND user_record_name = ?", arguments: user)
            try db.execute(
                sql: "DELETE FROM user_identities WHERE container_id = ? AND user_record_name = ?", arguments: user)
            return hashes
        }
    }

    /// Deletes a user's sessions, push tokens (a push token alone may be a web courier's
    /// credential) and push endpoints (a device signed out hears nothing more), and returns the
    /// sessions' hashes.
    private static func endSessions(_ db: Database, container: String, recordName: String) throws -> [String] {
        let arguments: StatementArguments = [container, recordName]
        let hashes = try String.fetchAll(
            db, sql: "SELECT token_hash FROM sessions WHERE container_id = ? AND user_record_name = ?", arguments: arguments)
        try db.execute(sql: "DELETE FROM sessions WHERE container_id = ? AND user_record_name = ?", arguments: arguments)
        try db.execute(sql: "DELETE FROM push_tokens WHERE container_id = ? AND user_record_name = ?", arguments: arguments)
        try db.execute(sql: "DELETE FROM push_endpoints WHERE container_id = ? AND user_record_name = ?", arguments: arguments)
        return hashes
    }

    static func noSuchUser(_ container: String, _ recordName: String) -> StratusError {
        StratusError(.notFound, "container '\(container)' has no user '\(recordName)'")
    }

    // MARK: Audit log

    public func appendAuditEntry(_ entry: AuditEntry) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO audit_log (time_ms, actor, action, status) VALUES (?, ?, ?, ?)",
                arguments: [entry.time, entry.actor, entry.action, entry.status])
        }
    }

    public func auditEntries(limit: Int) async throws -> [AuditEntry] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit_log ORDER BY id DESC LIMIT ?", arguments: [limit]).map { row in
                AuditEntry(time: row["time_ms"], actor: row["actor"], action: row["action"], status: row["status"])
            }
        }
    }
}
