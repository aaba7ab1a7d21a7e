import GRDB
import StratusModel
public import StratusStorage

/// Federated identities and single-use nonces, of the ``AccountStorage`` role (the type conforms
/// through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Federated identities

    public func createUser(_ user: UserInfo, identity: FederatedIdentity) async throws {
        precondition(
            identity.container == user.container && identity.userRecordName == user.recordName,
            "an identity created with a user names that user")
        try await pool.write { db in
            try Self.insertUser(db, user)
            try Self.insertIdentity(db, identity)
        }
    }

    public func identity(container: String, issuer: String, subject: String) async throws -> FederatedIdentity? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM user_identities WHERE container_id = ? AND issuer = ? AND subject = ?",
                arguments: [container, issuer, subject]
            ).map(Self.federatedIdentity)
        }
    }

    public func identities(container: String, userRecordName: String) async throws -> [FederatedIdentity] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM user_identities WHERE container_id = ? AND user_record_name = ?
                    ORDER BY created_ms, issuer, subject
                    """,
                arguments: [container, userRecordName]
            ).map(Self.federatedIdentity)
        }
    }

    public func linkIdentity(_ identity: FederatedIdentity) async throws {
        try await pool.write { db in
            guard
                try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM users WHERE container_id = ? AND record_name = ?",
                    arguments: [identity.container, identity.userRecordName]) != nil
            else { throw Self.noSuchUser(identity.container, identity.userRecordName) }
            try Self.insertIdentity(db, identity)
        }
    }

    public func unlinkIdentity(container: String, issuer: String, subject: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM user_identities WHERE container_id = ? AND issuer = ? AND subject = ?",
                arguments: [container, issuer, subject])
            return db.changesCount == 1
        }
    }

    public func recordIdentitySignIn(
        container: String, issuer: String, subject: String, emailAddress: String?, emailVerified: Bool,
        at timestamp: Int64
    ) async throws {
        let address = emailAddress?.lowercased()
        try await pool.write { db in
            // Without an address, the known one and its verification stay.
            try db.execute(
                sql: """
                    UPDATE user_identities SET last_sign_in_ms = ?, email = coalesce(?, email),
                        email_verified = CASE WHEN ? IS NULL THEN email_verified ELSE ? END
                    WHERE container_id = ? AND issuer = ? AND subject = ?
                    """,
                arguments: [timestamp, address, address, emailVerified, container, issuer, subject])
            guard db.changesCount == 1 else { throw Self.noSuchIdentity(container, issuer, subject) }
        }
    }

    /// Links an identity: `EXISTS` when it is linked to a user already.
    static func insertIdentity(_ db: Database, _ identity: FederatedIdentity) throws {
        try db.execute(
            sql: """
                INSERT INTO user_identities (
                    container_id, issuer, subject, provider, user_record_name, email, email_verified, created_ms,
                    last_sign_in_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (container_id, issuer, subject) DO NOTHING
                """,
            arguments: [
                identity.container, identity.issuer, identity.subject, identity.provider, identity.userRecordName,
                identity.emailAddress?.lowercased(), identity.emailVerified, identity.createdAt, identity.lastSignInAt,
            ])
        guard db.changesCount == 1 else {
            throw StratusError(
                .exists, "the identity '\(identity.subject)' of '\(identity.issuer)' is linked to a user already")
        }
    }

    static func federatedIdentity(_ row: Row) -> FederatedIdentity {
        FederatedIdentity(
            container: row["container_id"], issuer: row["issuer"], subject: row["subject"], provider: row["provider"],
            userRecordName: row["user_record_name"], emailAddress: row["email"], emailVerified: row["email_verified"],
            createdAt: row["created_ms"], lastSignInAt: row["last_sign_in_ms"])
    }

    static func noSuchIdentity(_ container: String, _ issuer: String, _ subject: String) -> StratusError {
        StratusError(.notFound, "container '\(container)' has no identity '\(subject)' of '\(issuer)'")
    }

    // MARK: Single-use nonces

    public func claimNonce(_ key: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM identity_nonces WHERE expires_ms <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO identity_nonces (nonce_key, expires_ms) VALUES (?, ?) ON CONFLICT (nonce_key) DO NOTHING",
                arguments: [key, expiresAt])
            return db.changesCount == 1
        }
    }
}
