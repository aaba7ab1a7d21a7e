import Logging
import PostgresNIO
import StratusModel
public import StratusStorage

/// Federated identities and single-use nonces, of the ``AccountStorage`` role (the type conforms
/// through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Federated identities

    public func createUser(_ user: UserInfo, identity: FederatedIdentity) async throws {
        precondition(
            identity.container == user.container && identity.userRecordName == user.recordName,
            "an identity created with a user names that user")
        try await requireContainer(user.container)
        try await transaction { connection in
            try await insertUser(connection, user)
            try await insertIdentity(connection, identity)
        }
    }

    public func identity(container: String, issuer: String, subject: String) async throws -> FederatedIdentity? {
        try await read { connection in
            try await Self.federatedIdentities(
                connection.run(
                    """
                    SELECT \(unescaped: Self.identityColumns) FROM user_identities
                    WHERE container_id = \(container) AND issuer = \(issuer) AND subject = \(subject)
                    """, logger: logger)
            ).first
        }
    }

    public func identities(container: String, userRecordName: String) async throws -> [FederatedIdentity] {
        try await read { connection in
            try await Self.federatedIdentities(
                connection.run(
                    """
                    SELECT \(unescaped: Self.identityColumns) FROM user_identities
                    WHERE container_id = \(container) AND user_record_name = \(userRecordName)
                    ORDER BY created_ms, issuer, subject
                    """, logger: logger))
        }
    }

    public func linkIdentity(_ identity: FederatedIdentity) async throws {
        try await transaction { connection in
            // The user's row stays until this commits: a deletion of the user waits for it.
            let user = try await connection.run(
                """
                SELECT 1 FROM users WHERE container_id = \(identity.container) AND record_name = \(identity.userRecordName)
                FOR SHARE
                """, logger: logger
            ).decode(Int32.self).collect()
            guard !user.isEmpty else { throw Self.noSuchUser(identity.container, identity.userRecordName) }
            try await insertIdentity(connection, identity)
        }
    }

    public func unlinkIdentity(container: String, issuer: String, subject: String) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            DELETE FROM user_identities WHERE container_id = \(container) AND issuer = \(issuer) AND subject = \(subject)
            RETURNING 1
            """
        ).isEmpty
    }

    public func recordIdentitySignIn(
        container: String, issuer: String, subject: String, emailAddress: String?, emailVerified: Bool,
        at timestamp: Int64
    ) async throws {
        let address = emailAddress?.lowercased()
        // Without an address, the known one and its verification stay.
        let updated = try await column(
            Int32.self,
            """
            UPDATE user_identities SET last_sign_in_ms = \(timestamp), email = coalesce(\(address), email),
                email_verified = CASE WHEN \(address)::text IS NULL THEN email_verified ELSE \(emailVerified) END
            WHERE container_id = \(container) AND issuer = \(issuer) AND subject = \(subject)
            RETURNING 1
            """)
        guard updated.count == 1 else {
            throw StratusError(.notFound, "container '\(container)' has no identity '\(subject)' of '\(issuer)'")
        }
    }

    /// Links an identity on `connection`: `EXISTS` when it is linked to a user already.
    func insertIdentity(_ connection: PostgresConnection, _ identity: FederatedIdentity) async throws {
        let inserted = try await connection.run(
            """
            INSERT INTO user_identities (
                container_id, issuer, subject, provider, user_record_name, email, email_verified, created_ms,
                last_sign_in_ms)
            VALUES (
                \(identity.container), \(identity.issuer), \(identity.subject), \(identity.provider),
                \(identity.userRecordName), \(identity.emailAddress?.lowercased()), \(identity.emailVerified),
                \(identity.createdAt), \(identity.lastSignInAt))
            ON CONFLICT (container_id, issuer, subject) DO NOTHING RETURNING 1
            """, logger: logger
        ).decode(Int32.self).collect()
        guard inserted.count == 1 else {
            throw StratusError(
                .exists, "the identity '\(identity.subject)' of '\(identity.issuer)' is linked to a user already")
        }
    }

    /// The columns ``federatedIdentities(_:)`` reads, in its order.
    static let identityColumns =
        "container_id, issuer, subject, provider, user_record_name, email, email_verified, created_ms, last_sign_in_ms"

    /// The identities of rows selecting ``identityColumns``.
    static func federatedIdentities(_ rows: PostgresRowSequence) async throws -> [FederatedIdentity] {
        try await rows.decode((String, String, String, String, String, String?, Bool, Int64, Int64).self).collect().map {
            FederatedIdentity(
                container: $0.0, issuer: $0.1, subject: $0.2, provider: $0.3, userRecordName: $0.4, emailAddress: $0.5,
                emailVerified: $0.6, createdAt: $0.7, lastSignInAt: $0.8)
        }
    }

    // MARK: Single-use nonces

    public func claimNonce(_ key: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        try await transaction { connection in
            try await connection.run("DELETE FROM identity_nonces WHERE expires_ms <= \(now)", logger: logger)
            return try await !connection.run(
                """
                INSERT INTO identity_nonces (nonce_key, expires_ms) VALUES (\(key), \(expiresAt))
                ON CONFLICT (nonce_key) DO NOTHING RETURNING 1
                """, logger: logger
            ).decode(Int32.self).collect().isEmpty
        }
    }
}
