import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
public import StratusStorage
import Synchronization

/// The ``AccountStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Containers, tokens, users, sessions

    public func createContainer(_ container: ContainerInfo) async throws {
        let inserted = try await column(
            String.self,
            """
            INSERT INTO containers (id, allows_sign_up, created_ms)
            VALUES (\(container.identifier), \(container.allowsSignUp), \(container.createdAt))
            ON CONFLICT (id) DO NOTHING RETURNING id
            """)
        guard inserted.count == 1 else {
            throw StratusError(.exists, "container '\(container.identifier)' already exists")
        }
    }

    public func container(_ identifier: String) async throws -> ContainerInfo? {
        try await containers(where: identifier).first
    }

    public func containers() async throws -> [ContainerInfo] {
        try await containers(where: nil)
    }

    func containers(where identifier: String?) async throws -> [ContainerInfo] {
        try await read { connection in
            try await connection.run(
                """
                SELECT id, allows_sign_up, created_ms FROM containers
                WHERE \(identifier)::text IS NULL OR id = \(identifier) ORDER BY id
                """, logger: logger
            ).decode((String, Bool, Int64).self).collect().map {
                ContainerInfo(identifier: $0.0, allowsSignUp: $0.1, createdAt: $0.2)
            }
        }
    }

    func requireContainer(_ identifier: String) async throws {
        guard try await container(identifier) != nil else {
            throw StratusError(.notFound, "container '\(identifier)' does not exist")
        }
    }

    public func createAPIToken(hash: String, container: String, name: String, createdAt: Int64) async throws {
        try await requireContainer(container)
        try await execute(
            """
            INSERT INTO api_tokens (token_hash, container_id, name, created_ms)
            VALUES (\(hash), \(container), \(name), \(createdAt))
            """)
    }

    public func containerForAPIToken(hash: String) async throws -> String? {
        try await column(String.self, "SELECT container_id FROM api_tokens WHERE token_hash = \(hash)").first
    }

    public func deleteAPIToken(hash: String, container: String) async throws -> Bool {
        try await column(
            String.self,
            "DELETE FROM api_tokens WHERE token_hash = \(hash) AND container_id = \(container) RETURNING token_hash"
        ).count == 1
    }

    public func createUser(_ user: UserInfo) async throws {
        try await requireContainer(user.container)
        try await read { connection in try await insertUser(connection, user) }
    }

    /// Inserts a user of an existing container: `EXISTS` when the username, or another unique key
    /// (the e-mail address, the record name), is taken in it.
    func insertUser(_ connection: PostgresConnection, _ user: UserInfo) async throws {
        let inserted: [Int32]
        do {
            inserted = try await connection.run(
                """
                INSERT INTO users (
                    container_id, record_name, username, password_hash, created_ms, email_address, discoverable,
                    given_name, family_name, disabled_ms)
                VALUES (
                    \(user.container), \(user.recordName), \(user.username), \(user.passwordHash), \(user.createdAt),
                    \(user.emailAddress?.lowercased()), \(user.discoverable), \(user.givenName), \(user.familyName),
                    \(user.disabledAt))
                ON CONFLICT (container_id, username) DO NOTHING RETURNING 1
                """, logger: logger
            ).decode(Int32.self).collect()
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            let address = user.emailAddress?.lowercased() ?? ""
            throw StratusError(
                .exists,
                "another user of the container has the record name '\(user.recordName)' or the e-mail address '\(address)'")
        }
        guard inserted.count == 1 else { throw StratusError(.exists, "username '\(user.username)' is taken") }
    }

    public func user(container: String, username: String) async throws -> UserInfo? {
        try await user(container: container, column: "username", value: username)
    }

    public func user(container: String, recordName: String) async throws -> UserInfo? {
        try await user(container: container, column: "record_name", value: recordName)
    }

    public func user(container: String, emailAddress: String) async throws -> UserInfo? {
        try await user(container: container, column: "email_address", value: emailAddress.lowercased())
    }

    func user(container: String, column: String, value: String) async throws -> UserInfo? {
        let query = PostgresQuery(
            unsafeSQL: "SELECT \(Self.userColumns) FROM users WHERE container_id = $1 AND \(column) = $2",
            binds: Self.binds(container, value))
        return try await read { connection in
            try await Self.users(container: container, from: connection.run(query, logger: logger)).first
        }
    }

    /// The columns ``users(container:from:)`` reads, in its order.
    static let userColumns =
        "record_name, username, password_hash, created_ms, email_address, discoverable, given_name, family_name, "
        + "disabled_ms"

    /// The users of rows selecting ``userColumns``.
    static func users(container: String, from rows: PostgresRowSequence) async throws -> [UserInfo] {
        try await rows.decode((String, String, String, Int64, String?, Bool, String?, String?, Int64?).self).collect().map {
            UserInfo(
                container: container, recordName: $0.0, username: $0.1, passwordHash: $0.2, createdAt: $0.3,
                emailAddress: $0.4, discoverable: $0.5, givenName: $0.6, familyName: $0.7, disabledAt: $0.8)
        }
    }

    public func createServerKey(_ key: ServerKeyInfo) async throws {
        try await requireContainer(key.container)
        try await execute(
            """
            INSERT INTO server_keys (key_id, container_id, environment, public_key, user_record_name, created_ms, revoked_ms)
            VALUES (
                \(key.keyID), \(key.container), \(key.environment.rawValue), \(key.publicKeyPEM), \(key.userRecordName),
                \(key.createdAt), \(key.revokedAt))
            """)
    }

    public func serverKey(id: String) async throws -> ServerKeyInfo? {
        try await serverKeys(where: "key_id", id).first
    }

    public func serverKeys(container: String) async throws -> [ServerKeyInfo] {
        try await serverKeys(where: "container_id", container)
    }

    private func serverKeys(where column: String, _ value: String) async throws -> [ServerKeyInfo] {
        let query = PostgresQuery(
            unsafeSQL: """
                SELECT key_id, container_id, environment, public_key, user_record_name, created_ms, revoked_ms
                FROM server_keys WHERE \(column) = $1 ORDER BY created_ms, key_id
                """, binds: Self.binds(value))
        return try await read { connection in
            try await connection.run(query, logger: logger)
                .decode((String, String, String, String, String, Int64, Int64?).self).collect().map {
                    ServerKeyInfo(
                        keyID: $0.0, container: $0.1, environment: ContainerEnvironment(rawValue: $0.2) ?? .development,
                        publicKeyPEM: $0.3, userRecordName: $0.4, createdAt: $0.5, revokedAt: $0.6)
                }
        }
    }

    public func revokeServerKey(id: String, container: String, at timestamp: Int64) async throws -> Bool {
        try await column(
            String.self,
            """
            UPDATE server_keys SET revoked_ms = coalesce(revoked_ms, \(timestamp))
            WHERE key_id = \(id) AND container_id = \(container) RETURNING key_id
            """
        ).count == 1
    }

    public func setEmailAddress(_ emailAddress: String?, container: String, recordName: String) async throws {
        let address = emailAddress?.lowercased()
        let updated: [String]
        do {
            updated = try await column(
                String.self,
                """
                UPDATE users SET email_address = \(address) WHERE container_id = \(container) AND record_name = \(recordName)
                RETURNING record_name
                """)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw StratusError(.exists, "another user of the container has the e-mail address '\(address ?? "")'")
        }
        guard updated.count == 1 else { throw StratusError(.notFound, "user '\(recordName)' does not exist") }
    }

    public func setDiscoverability(
        _ discoverable: Bool, givenName: String?, familyName: String?, container: String, recordName: String
    ) async throws {
        let updated = try await column(
            String.self,
            """
            UPDATE users SET discoverable = \(discoverable), given_name = \(givenName), family_name = \(familyName)
            WHERE container_id = \(container) AND record_name = \(recordName)
            RETURNING record_name
            """)
        guard updated.count == 1 else { throw StratusError(.notFound, "user '\(recordName)' does not exist") }
    }

    public func createSession(hash: String, session: SessionInfo, passwordHash: String) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            INSERT INTO sessions (token_hash, container_id, user_record_name, expires_ms)
            SELECT \(hash), \(session.container), \(session.userRecordName), \(session.expiresAt) FROM users
            WHERE container_id = \(session.container) AND record_name = \(session.userRecordName)
                AND disabled_ms IS NULL AND password_hash = \(passwordHash)
            FOR SHARE
            RETURNING 1
            """
        ).isEmpty
    }

    public func session(hash: String) async throws -> SessionInfo? {
        try await read { connection in
            try await connection.run(
                "SELECT container_id, user_record_name, expires_ms FROM sessions WHERE token_hash = \(hash)",
                logger: logger
            ).decode((String, String, Int64).self).collect().first.map {
                SessionInfo(container: $0.0, userRecordName: $0.1, expiresAt: $0.2)
            }
        }
    }

    public func deleteSession(hash: String) async throws {
        try await execute("DELETE FROM sessions WHERE token_hash = \(hash)")
    }

    public func setUserDisabled(_ disabled: Bool, container: String, recordName: String, at timestamp: Int64) async throws
        -> [String]
    {
        let disabledAt: Int64? = disabled ? timestamp : nil
        return try await transaction { connection in
            let updated = try await connection.run(
                """
                UPDATE users SET disabled_ms = \(disabledAt)
                WHERE container_id = \(container) AND record_name = \(recordName) RETURNING 1
                """, logger: logger
            ).decode(Int32.self).collect()
            guard updated.count == 1 else { throw Self.noSuchUser(container, recordName) }
            return disabled ? try await endSessions(connection, container: container, recordName: recordName) : []
        }
    }

    public func endSessions(container: String, recordName: String) async throws -> [String] {
        try await transaction { connection in try await endSessions(connection, container: container, recordName: recordName) }
    }

    public func setPasswordHash(_ hash: String, container: String, recordName: String) async throws -> [String] {
        try await transaction { connection in
            let updated = try await connection.run(
                """
                UPDATE users SET password_hash = \(hash)
                WHERE container_id = \(container) AND record_name = \(recordName) RETURNING 1
                """, logger: logger
            ).decode(Int32.self).collect()
            guard updated.count == 1 else { throw Self.noSuchUser(container, recordName) }
            return try await endSessions(connection, container: container, recordName: recordName)
        }
    }

    public func setUsernameAndPassword(username: String, passwordHash: String, container: String, recordName: String)
        async throws
    {
        let updated: [String]
        do {
            updated = try await column(
                String.self,
                """
                UPDATE users SET username = \(username), password_hash = \(passwordHash)
                WHERE container_id = \(container) AND record_name = \(recordName)
                RETURNING record_name
                """)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw StratusError(.exists, "username '\(username)' is taken")
        }
        guard updated.count == 1 else { throw Self.noSuchUser(container, recordName) }
    }

    public func deleteUser(container: String, recordName: String) async throws -> [String] {
        try await transaction { connection in
            // The user's row first: a sign-in, a session or an identity link racing this waits for it,
            // then finds no user.
            let deleted = try await connection.run(
                "DELETE FROM users WHERE container_id = \(container) AND record_name = \(recordName) RETURNING 1",
                logger: logger
            ).decode(Int32.self).collect()
            guard deleted.count == 1 else { throw Self.noSuchUser(container, recordName) }
            let hashes = try await endSessions(connection, container: container, recordName: recordName)
            // Their own databases in both environments (the private one, and a shared one's default
            // zone if it was ever made), whole: no tombstone is left, as no device of theirs reads it.
            // Their zones are locked as writers lock them, so a write holding one commits before its
            // rows are deleted here, and one that comes later finds no zone.
            let binds = Self.binds(container, recordName, DatabaseScope.public.rawValue)
            let databases = "SELECT id FROM databases WHERE container_id = $1 AND owner = $2 AND scope != $3"
            let zones = "SELECT id FROM zones WHERE database_id IN (\(databases))"
            _ = try await connection.run(
                PostgresQuery(unsafeSQL: zones + " ORDER BY id FOR UPDATE", binds: binds), logger: logger
            ).decode(Int64.self).collect()
            try await deleteContents(ofZones: zones, binds: binds, connection)
            // Zones go with their database (ON DELETE CASCADE).
            try await connection.run(
                PostgresQuery(
                    unsafeSQL: "DELETE FROM databases WHERE container_id = $1 AND owner = $2 AND scope != $3",
                    binds: binds),
                logger: logger)
            // Their place in other users' shares: the index the shares' participants are reached by.
            try await connection.run(
                """
                DELETE FROM share_participants p USING zones z, databases d
                WHERE p.user_record_name = \(recordName) AND z.id = p.zone_id AND d.id = z.database_id
                    AND d.container_id = \(container)
                """, logger: logger)
            try await connection.run(
                """
                DELETE FROM subscriptions
                WHERE container_id = \(container) AND (subscriber = \(recordName) OR owner = \(recordName))
                """, logger: logger)
            try await connection.run(
                "DELETE FROM uploads WHERE container_id = \(container) AND user_record_name = \(recordName)",
                logger: logger)
            try await connection.run(
                "DELETE FROM user_identities WHERE container_id = \(container) AND user_record_name = \(recordName)",
                logger: logger)
            return hashes
        }
    }

    /// Deletes a user's sessions, push tokens (a push token alone may be a web courier's
    /// credential) and push endpoints (a device signed out hears nothing more), and returns the
    /// sessions' hashes.
    private func endSessions(_ connection: PostgresConnection, container: String, recordName: String) async throws
        -> [String]
    {
        try await connection.run(
            """
            WITH push AS (DELETE FROM push_tokens WHERE container_id = \(container) AND user_record_name = \(recordName)),
                endpoints AS (
                    DELETE FROM push_endpoints WHERE container_id = \(container) AND user_record_name = \(recordName))
            DELETE FROM sessions WHERE container_id = \(container) AND user_record_name = \(recordName)
            RETURNING token_hash
            """, logger: logger
        ).decode(String.self).collect()
    }

    static func noSuchUser(_ container: String, _ recordName: String) -> StratusError {
        StratusError(.notFound, "container '\(container)' has no user '\(recordName)'")
    }

    // MARK: Audit log

    public func appendAuditEntry(_ entry: AuditEntry) async throws {
        try await execute(
            """
            INSERT INTO audit_log (time_ms, actor, action, status)
            VALUES (\(entry.time), \(entry.actor), \(entry.action), \(entry.status))
            """)
    }

    public func auditEntries(limit: Int) async throws -> [AuditEntry] {
        try await read { connection in
            try await connection.run(
                "SELECT time_ms, actor, action, status FROM audit_log ORDER BY id DESC LIMIT \(limit)", logger: logger
            ).decode((Int64, String, String, Int).self).collect().map {
                AuditEntry(time: $0.0, actor: $0.1, action: $0.2, status: $0.3)
            }
        }
    }
}
