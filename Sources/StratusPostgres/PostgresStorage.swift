import Foundation
public import Logging
import NIOCore
public import PostgresNIO
import StratusModel
public import StratusStorage
import Synchronization

/// The storage backend for several Stratus instances sharing one PostgreSQL database, through a
/// pool of postgres-nio connections.
///
/// Writes to a zone lock the zone's row first and hold it until they commit, so writers of one zone
/// take turns whichever instance they come through: sequence numbers are handed out in commit order
/// and never skip, and a record's change tag is checked against its committed state inside the
/// transaction that replaces it. Reads run without a transaction; a change feed only returns
/// records up to the zone's committed sequence number read first, so it never moves past a change it
/// did not see.
public final class PostgresStorage: StratusStorage {
    let client: PostgresClient
    let logger: Logger
    private let runTask: Task<Void, Never>
    /// Decoded schemas by container and environment, with the version they were read at.
    let schemas = Mutex<[String: (version: Int64, schema: Schema)]>([:])
    private let bus: PostgresMessageBus

    /// Connects to the database at a `postgres://user:password@host:port/database` URL, starts the
    /// connection pool and brings the schema up to date. Call ``shutdown()`` when done.
    ///
    /// - Parameters:
    ///   - url: The database URL; `sslmode=disable` or `require` in its query chooses TLS (by default
    ///     TLS is used when the server offers it).
    ///   - maximumConnections: The size of the connection pool.
    public static func connect(
        url: String, maximumConnections: Int = 20, logger: Logger = Logger(label: "stratus.postgres")
    ) async throws -> PostgresStorage {
        let storage = PostgresStorage(
            configuration: try configuration(url: url, maximumConnections: maximumConnections), logger: logger)
        do {
            try await PostgresMigrations.migrate(storage.client, logger: logger)
        } catch {
            storage.shutdown()
            throw StratusError(.internalError, "PostgreSQL at \(redacted(url)): \(describe(error))")
        }
        return storage
    }

    private init(configuration: PostgresClient.Configuration, logger: Logger) {
        client = PostgresClient(configuration: configuration, backgroundLogger: Self.poolLogger(logger))
        self.logger = logger
        bus = PostgresMessageBus(client: client, logger: logger)
        let client = client
        runTask = Task { await client.run() }
    }


    /// Messages between the instances sharing this database, over `LISTEN`/`NOTIFY`.
    public var messageBus: (any InstanceMessageBus)? { bus }

    /// The pool's logger: `logger` without postgres-nio's warning that a lease came before `run()`
    /// started, which the first query after ``connect(url:maximumConnections:logger:)`` races with
    /// harmlessly (the lease waits for the pool).
    private static func poolLogger(_ logger: Logger) -> Logger {
        struct EarlyLeaseFilter: LogHandler {
            var wrapped: any LogHandler
            var metadata: Logger.Metadata {
                get { wrapped.metadata }
                set { wrapped.metadata = newValue }
            }
            var logLevel: Logger.Level {
                get { wrapped.logLevel }
                set { wrapped.logLevel = newValue }
            }
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { wrapped[metadataKey: key] }
                set { wrapped[metadataKey: key] = newValue }
            }
            func log(event: LogEvent) {
                guard !event.message.description.contains("`PostgresClient.run()` hasn't been called yet") else { return }
                wrapped.log(event: event)
            }
        }
        return Logger(label: logger.label) { _ in EarlyLeaseFilter(wrapped: logger.handler) }
    }

    /// Closes the pool's connections and stops listening for other instances' messages.
    public func shutdown() {
        bus.stop()
        runTask.cancel()
    }

    /// The schema versions the database has and the latest this build knows.
    public func migrationStatus() async throws -> (applied: [Int], latest: Int) {
        let applied = try await client.withConnection { connection in
            try await connection.run("SELECT version FROM stratus_migrations ORDER BY version", logger: logger)
                .decode(Int.self).collect()
        }
        return (applied, PostgresMigrations.latestVersion)
    }

    /// Parses a `postgres://` (or `postgresql://`) URL into a pool configuration; `BAD_REQUEST` naming
    /// the rule when it is not one.
    public static func configuration(
        url text: String, maximumConnections: Int = 20
    ) throws -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
            let host = url.host, !host.isEmpty
        else {
            throw StratusError.badRequest(
                "database: '\(redacted(text))' is not a postgres://user[:password]@host[:port]/database URL")
        }
        let database = String(url.path.drop(while: { $0 == "/" }))
        let sslMode = url.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        let tls: PostgresClient.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
        case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
        default: throw StratusError.badRequest("database: sslmode must be disable, prefer or require, not '\(sslMode)'")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: url.port ?? 5432, username: url.user?.removingPercentEncoding ?? "postgres",
            password: url.password?.removingPercentEncoding, database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        return configuration
    }

    /// A database URL with its password hidden, for messages and logs.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }

    /// What went wrong with the database, in words: postgres-nio hides server messages from its
    /// errors' descriptions.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)"
        }
        return "\(error)"
    }

    // MARK: Connections

    /// Runs one statement for its effect, on a pooled connection outside a transaction.
    func execute(_ query: PostgresQuery) async throws {
        try await read { connection in _ = try await connection.run(query, logger: logger).collect() }
    }

    /// Runs `body` on a pooled connection, outside a transaction.
    func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await client.withConnection { connection in try await body(connection) }
    }

    /// Runs `body` in a transaction on a pooled connection; an error rolls it back. A transaction
    /// that lost a race (a deadlock, a serialization failure, ``RetryTransaction``) runs again, up to
    /// five times.
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
            } catch let failure as PostgresTransactionError {
                let error = failure.closureError ?? failure.beginError ?? failure.commitError ?? failure
                let state = (error as? PSQLError)?.serverInfo?[.sqlState]
                guard attempt < 5, error is RetryTransaction || state == "40P01" || state == "40001" else {
                    throw error
                }
                attempt += 1
            }
        }
    }

    /// Thrown inside a transaction that must run again from the start.
    struct RetryTransaction: Error {}


    /// The values of the first column of a statement's rows.
    func column<T: PostgresDecodable & Sendable>(_ type: T.Type, _ query: PostgresQuery) async throws -> [T] {
        try await read { connection in try await connection.run(query, logger: logger).decode(T.self).collect() }
    }

    // MARK: Settings

    public func setting(_ key: String) async throws -> String? {
        try await column(String.self, "SELECT value FROM settings WHERE key = \(key)").first
    }

    public func initializeSetting(_ key: String, to value: String) async throws -> String {
        try await execute("INSERT INTO settings (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO NOTHING")
        return try await column(String.self, "SELECT value FROM settings WHERE key = \(key)")[0]
    }

    public func setSetting(_ key: String, to value: String) async throws {
        try await execute(
            """
            INSERT INTO settings (key, value) VALUES (\(key), \(value))
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            """)
    }

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

    private func containers(where identifier: String?) async throws -> [ContainerInfo] {
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

    private func requireContainer(_ identifier: String) async throws {
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

    public func createUser(_ user: UserInfo) async throws {
        try await requireContainer(user.container)
        let inserted = try await column(
            Int32.self,
            """
            INSERT INTO users (container_id, record_name, username, password_hash, created_ms)
            VALUES (\(user.container), \(user.recordName), \(user.username), \(user.passwordHash), \(user.createdAt))
            ON CONFLICT (container_id, username) DO NOTHING RETURNING 1
            """)
        guard inserted.count == 1 else { throw StratusError(.exists, "username '\(user.username)' is taken") }
    }

    public func user(container: String, username: String) async throws -> UserInfo? {
        try await user(container: container, column: "username", value: username)
    }

    public func user(container: String, recordName: String) async throws -> UserInfo? {
        try await user(container: container, column: "record_name", value: recordName)
    }

    private func user(container: String, column: String, value: String) async throws -> UserInfo? {
        let query = PostgresQuery(
            unsafeSQL: """
                SELECT record_name, username, password_hash, created_ms FROM users
                WHERE container_id = $1 AND \(column) = $2
                """, binds: Self.binds(container, value))
        return try await read { connection in
            try await connection.run(query, logger: logger).decode((String, String, String, Int64).self)
                .collect().first.map {
                    UserInfo(container: container, recordName: $0.0, username: $0.1, passwordHash: $0.2, createdAt: $0.3)
                }
        }
    }

    public func createSession(hash: String, session: SessionInfo) async throws {
        try await execute(
            """
            INSERT INTO sessions (token_hash, container_id, user_record_name, expires_ms)
            VALUES (\(hash), \(session.container), \(session.userRecordName), \(session.expiresAt))
            """)
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

    // MARK: Subscriptions

    public func subscriptions(in database: DatabaseLocator, subscriber: String?) async throws -> [StoredSubscription] {
        let rows = try await read { connection in
            try await connection.run(
                """
                SELECT subscriber, definition, created_ms FROM subscriptions
                WHERE container_id = \(database.container) AND environment = \(database.environment.rawValue)
                    AND scope = \(database.scope.rawValue) AND owner = \(database.owner)
                    AND (\(subscriber)::text IS NULL OR subscriber = \(subscriber))
                ORDER BY subscriber, subscription_id
                """, logger: logger
            ).decode((String, ByteBuffer, Int64).self).collect()
        }
        return try rows.map { row in
            // Definitions were written by saveSubscription, so they decode.
            StoredSubscription(
                database: database, subscriber: row.0,
                definition: try SubscriptionDictionary(jsonBytes: Array(row.1.readableBytesView)), createdAt: row.2)
        }
    }

    public func saveSubscription(_ subscription: StoredSubscription) async throws {
        let database = subscription.database
        let definition = ByteBuffer(bytes: subscription.definition.jsonBytes)
        try await execute(
            """
            INSERT INTO subscriptions
                (container_id, environment, scope, owner, subscriber, subscription_id, definition, created_ms)
            VALUES (\(database.container), \(database.environment.rawValue), \(database.scope.rawValue),
                \(database.owner), \(subscription.subscriber), \(subscription.subscriptionID), \(definition),
                \(subscription.createdAt))
            ON CONFLICT (container_id, environment, scope, owner, subscriber, subscription_id)
            DO UPDATE SET definition = excluded.definition
            """)
    }

    public func deleteSubscription(id: String, subscriber: String, in database: DatabaseLocator) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            DELETE FROM subscriptions
            WHERE container_id = \(database.container) AND environment = \(database.environment.rawValue)
                AND scope = \(database.scope.rawValue) AND owner = \(database.owner)
                AND subscriber = \(subscriber) AND subscription_id = \(id)
            RETURNING 1
            """
        ).isEmpty
    }

    // MARK: Push tokens

    public func createPushToken(hash: String, token: PushTokenInfo) async throws {
        try await requireContainer(token.container)
        try await execute(
            """
            INSERT INTO push_tokens
                (token_hash, container_id, environment, user_record_name, device_id, created_ms, used_ms)
            VALUES (\(hash), \(token.container), \(token.environment.rawValue), \(token.userRecordName),
                \(token.deviceID), \(token.createdAt), \(token.usedAt))
            """)
    }

    public func pushToken(hash: String) async throws -> PushTokenInfo? {
        try await read { connection in
            try await connection.run(
                """
                SELECT container_id, environment, user_record_name, device_id, created_ms, used_ms
                FROM push_tokens WHERE token_hash = \(hash)
                """, logger: logger
            ).decode((String, String, String?, String?, Int64, Int64).self).collect().first.map {
                PushTokenInfo(
                    container: $0.0, environment: ContainerEnvironment(rawValue: $0.1) ?? .development,
                    userRecordName: $0.2, deviceID: $0.3, createdAt: $0.4, usedAt: $0.5)
            }
        }
    }

    public func registerPushToken(
        hash: String, userRecordName: String, deviceID: String?, timestamp: Int64
    ) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            UPDATE push_tokens SET user_record_name = \(userRecordName), device_id = \(deviceID), used_ms = \(timestamp)
            WHERE token_hash = \(hash) RETURNING 1
            """
        ).isEmpty
    }

    public func markPushTokenUsed(hash: String, timestamp: Int64) async throws {
        try await execute("UPDATE push_tokens SET used_ms = greatest(used_ms, \(timestamp)) WHERE token_hash = \(hash)")
    }

    public func purgePushTokens(unusedSince timestamp: Int64) async throws -> Int {
        try await column(Int32.self, "DELETE FROM push_tokens WHERE used_ms < \(timestamp) RETURNING 1").count
    }

    // MARK: Assets

    public func registerAsset(checksum: String, size: Int64, timestamp: Int64) async throws {
        try await execute(
            """
            INSERT INTO assets (checksum, size, registered_ms) VALUES (\(checksum), \(size), \(timestamp))
            ON CONFLICT (checksum) DO UPDATE SET registered_ms = greatest(assets.registered_ms, excluded.registered_ms)
            """)
    }

    public func collectAssets(registeredBefore timestamp: Int64) async throws -> [String] {
        try await column(
            String.self,
            """
            DELETE FROM assets WHERE registered_ms < \(timestamp)
                AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
            RETURNING checksum
            """)
    }

    // MARK: Maintenance

    public func purgeTombstones(before timestamp: Int64) async throws -> Int {
        try await transaction { connection in
            try await connection.run(
                """
                UPDATE zones SET purged_seq = greatest(zones.purged_seq, purged.seq)
                FROM (SELECT zone_id, max(seq) AS seq FROM records WHERE deleted AND modified_ms < \(timestamp)
                      GROUP BY zone_id) AS purged
                WHERE zones.id = purged.zone_id
                """, logger: logger)
            var removed = try await connection.run(
                "DELETE FROM records WHERE deleted AND modified_ms < \(timestamp) RETURNING 1", logger: logger
            ).collect().count
            try await connection.run(
                """
                UPDATE databases SET purged_seq = greatest(databases.purged_seq, purged.seq)
                FROM (SELECT database_id, max(change_seq) AS seq FROM zones WHERE deleted AND changed_ms < \(timestamp)
                      GROUP BY database_id) AS purged
                WHERE databases.id = purged.database_id
                """, logger: logger)
            removed += try await connection.run(
                "DELETE FROM zones WHERE deleted AND changed_ms < \(timestamp) RETURNING 1", logger: logger
            ).collect().count
            return removed
        }
    }
}

extension PostgresConnection {
    /// Runs a statement; its rows may be read or ignored.
    @discardableResult
    func run(_ statement: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await query(statement, logger: logger)
    }
}

extension AsyncSequence {
    /// Every element, in order.
    func collect() async throws -> [Element] {
        var elements: [Element] = []
        for try await element in self { elements.append(element) }
        return elements
    }
}
