import Foundation
public import Logging
import NIOCore
public import PostgresNIO
import StratusModel
public import StratusStorage
import ServiceLifecycle
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
    /// Decoded schemas by container and environment, with the version they were read at.
    let schemas = Mutex<[String: (version: Int64, schema: Schema)]>([:])
    private let bus: PostgresMessageBus
    private let ready = ReadinessGate()
    /// Connections leased by ``read(_:)`` and ``transaction(_:)`` now.
    private let leased = Atomic<Int>(0)
    private let maximumConnections: Int
    private let endpoint: Endpoint
    /// The database URL without its password, for errors.
    private let redactedURL: String
    /// Record writes waiting for their zone's next group.
    let zoneWrites = CommitGroups<ZoneKey, ZoneWrite, ModifyRecordsOutcome>()

    /// A storage on the database at a `postgres://user:password@host:port/database` URL. Nothing
    /// connects until ``run()``, which starts the pool and brings the schema up to date; calls made
    /// before then wait for it.
    ///
    /// - Parameters:
    ///   - url: The database URL; `sslmode=disable` or `require` in its query chooses TLS (by default
    ///     TLS is used when the server offers it).
    ///   - maximumConnections: The size of the connection pool.
    public init(url: String, maximumConnections: Int = defaultMaximumConnections, logger: Logger = Logger(label: "stratus.postgres")) throws {
        endpoint = try Endpoint(url: url)
        self.maximumConnections = maximumConnections
        client = PostgresClient(
            configuration: endpoint.poolConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        self.logger = logger
        bus = PostgresMessageBus(client: client, logger: logger)
        redactedURL = Self.redacted(url)
    }

    /// Runs the connection pool until the service group shuts down (or the task is cancelled), and
    /// first applies the migrations the database lacks, under an advisory lock so that instances
    /// starting together apply them once. A database that cannot be reached or migrated ends the run
    /// with an error naming it, and so do the calls that were waiting.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            do {
                let connection = try await endpoint.connect(logger: logger)
                do {
                    try await PostgresMigrations.migrate(connection, logger: logger)
                    try await connection.close()
                } catch {
                    try? await connection.close()
                    throw error
                }
            } catch {
                let failure = StratusError(.internalError, "PostgreSQL at \(redactedURL): \(Self.describe(error))")
                ready.fail(failure)
                throw failure
            }
            ready.open()
        }
    }

    /// Messages between the instances sharing this database, over `LISTEN`/`NOTIFY`.
    public var messageBus: (any InstanceMessageBus)? { bus }

    /// The schema versions the database has and the latest this build knows.
    public func migrationStatus() async throws -> (applied: [String], latest: String) {
        let applied = try await column(Int.self, "SELECT version FROM stratus_migrations ORDER BY version")
        return (applied.map(String.init), String(PostgresMigrations.latestVersion))
    }

    /// Where and how to connect, parsed from a `postgres://` (or `postgresql://`) URL.
    struct Endpoint: Sendable {
        var host: String
        var port: Int
        var username: String
        var password: String?
        var database: String?
        /// `disable`, `prefer` or `require`.
        var sslMode: String

        /// `BAD_REQUEST` naming the rule when `text` is not such a URL.
        init(url text: String) throws {
            guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
                let host = url.host, !host.isEmpty
            else {
                throw StratusError.badRequest(
                    "database: '\(PostgresStorage.redacted(text))' is not a postgres://user[:password]@host[:port]/database URL")
            }
            let database = String(url.path.drop(while: { $0 == "/" }))
            let sslMode = url.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
            switch sslMode {
            case "disable": self.sslMode = "disable"
            case "prefer", "allow": self.sslMode = "prefer"
            case "require", "verify-ca", "verify-full": self.sslMode = "require"
            default: throw StratusError.badRequest("database: sslmode must be disable, prefer or require, not '\(sslMode)'")
            }
            self.host = host
            port = url.port ?? 5432
            username = url.user?.removingPercentEncoding ?? "postgres"
            password = url.password?.removingPercentEncoding
            self.database = database.isEmpty ? nil : database
        }

        /// The pool's configuration.
        func poolConfiguration(maximumConnections: Int) -> PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS =
                switch sslMode {
                case "disable": .disable
                case "require": .require(.makeClientConfiguration())
                default: .prefer(.makeClientConfiguration())
                }
            var configuration = PostgresClient.Configuration(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
            configuration.options.maximumConnections = maximumConnections
            return configuration
        }

        /// One connection of its own, for the migrations: it fails at once when the database cannot be
        /// reached, where the pool would keep trying.
        func connect(logger: Logger) async throws -> PostgresConnection {
            let tls: PostgresConnection.Configuration.TLS =
                switch sslMode {
                case "disable": .disable
                case "require": .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                default: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                }
            return try await PostgresConnection.connect(
                on: PostgresClient.defaultEventLoopGroup.any(),
                configuration: PostgresConnection.Configuration(
                    host: host, port: port, username: username, password: password, database: database, tls: tls),
                id: 0, logger: logger
            ).get()
        }
    }

    /// The size of the connection pool `stratus serve` opens.
    public static let defaultMaximumConnections = 20

    /// The connection pool's configuration for a database URL; `BAD_REQUEST` naming the rule when it
    /// is not a `postgres://` URL. For raw baselines beside the storage (the benchmarks).
    public static func configuration(url: String, maximumConnections: Int = defaultMaximumConnections) throws -> PostgresClient.Configuration {
        try Endpoint(url: url).poolConfiguration(maximumConnections: maximumConnections)
    }

    /// Runs one statement on the database at `url` over a connection of its own, as an administrator
    /// would with psql (`CREATE DATABASE`, `pg_terminate_backend(…)`): for tests and benchmarks, which
    /// thus need no database driver of their own.
    public static func execute(_ sql: String, at url: String) async throws {
        let logger = Logger(label: "stratus.postgres.admin")
        let connection = try await Endpoint(url: url).connect(logger: logger)
        do {
            try await connection.run(PostgresQuery(unsafeSQL: sql), logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
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

    /// Runs `body` on a pooled connection, outside a transaction, once the storage is ready.
    func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await ready.wait()
        do {
            return try await client.withConnection { connection in
                leased.add(1, ordering: .relaxed)
                defer { leased.subtract(1, ordering: .relaxed) }
                return try await body(connection)
            }
        } catch {
            throw Self.refusedInput(error) ?? error
        }
    }

    /// The client's error for a statement PostgreSQL refused because of a value the client sent:
    /// text holding U+0000, which PostgreSQL's text cannot hold (SQLSTATE 22021). Checks of each
    /// request refuse such text first; this answers any they leave through with 400, not 500.
    static func refusedInput(_ error: any Error) -> StratusError? {
        guard (error as? PSQLError)?.serverInfo?[.sqlState] == "22021" else { return nil }
        return StratusError.badRequest("a text value of the request holds the character U+0000, which no text may hold")
    }

    public func health() async throws -> StorageHealth {
        let (size, version, listeners) = try await read { connection in
            try await connection.run(
                """
                SELECT pg_database_size(current_database()), current_setting('server_version'),
                    (SELECT count(*) FROM pg_stat_activity
                     WHERE datname = current_database() AND query LIKE \("LISTEN%" + PostgresMessageBus.channel + "%"))
                """, logger: logger
            ).decode((Int64, String, Int64).self).collect()[0]
        }
        let pool = connectionPoolUsage
        return StorageHealth(
            backend: "PostgreSQL", sizeBytes: size,
            details: [
                .init("database", redactedURL), .init("server version", version),
                .init("instances on the bus", "\(listeners) (each listens on one connection)"),
                .init("pool", "\(pool?.inUse ?? 0) of \(pool?.capacity ?? 0) connections in use"),
            ])
    }

    /// How many commit groups record writes through this instance have formed since it started, and
    /// how many writes they held: more writes than groups means concurrent writes to a zone shared a
    /// transaction.
    public var commitGroupCounts: (groups: Int, writes: Int) {
        let counts = zoneWrites.counts
        return (counts.groups, counts.jobs)
    }

    public var connectionPoolUsage: ConnectionPoolUsage? {
        ConnectionPoolUsage(inUse: leased.load(ordering: .relaxed), capacity: maximumConnections)
    }

    /// Runs `body` in a transaction on a pooled connection; an error rolls it back. A transaction
    /// that lost a race (a deadlock, a serialization failure, ``RetryTransaction``) runs again, up to
    /// five times.
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await ready.wait()
        var attempt = 1
        while true {
            do {
                return try await client.withTransaction(logger: logger) { connection in
                    leased.add(1, ordering: .relaxed)
                    defer { leased.subtract(1, ordering: .relaxed) }
                    return try await body(connection)
                }
            } catch let failure as PostgresTransactionError {
                let error = failure.closureError ?? failure.beginError ?? failure.commitError ?? failure
                let state = (error as? PSQLError)?.serverInfo?[.sqlState]
                guard error is RetryTransaction || state == "40P01" || state == "40001" else {
                    throw Self.refusedInput(error) ?? error
                }
                guard attempt < 5 else {
                    // Lost five races in a row: the client's retry after a pause has better odds.
                    throw StratusError(
                        .tryAgainLater, "the database was busy with conflicting writes; try again", retryAfter: 1)
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
