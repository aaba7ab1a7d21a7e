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
    let runTask: Task<Void, Never>
    /// Decoded schemas by container and environment, with the version they were read at.
    let schemas = Mutex<[String: (version: Int64, schema: Schema)]>([:])
    let bus: PostgresMessageBus

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

    init(configuration: PostgresClient.Configuration, logger: Logger) {
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
    static func poolLogger(_ logger: Logger) -> Logger {
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
