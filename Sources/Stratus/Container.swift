public import Foundation
public import Logging
import StratusModel
import Synchronization

/// A container on a Stratus server: the app's data, its users, and their databases (CloudKit's
/// `CKContainer`).
///
/// ```swift
/// let container = Container(
///     identifier: "iCloud.com.example.notes", serverURL: URL(string: "https://sync.example.com")!,
///     apiToken: apiToken)
/// try await container.signIn(username: "mei", password: password)
/// let zone = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Notes"))
/// ```
///
/// A container keeps one HTTP connection pool for all its databases and reuses connections between
/// calls; it speaks TLS when `serverURL` is `https`. It is safe to use from any task.
public final class Container: Sendable {
    /// A container's environment; each has its own data and schema.
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        /// The schema grows as records are saved.
        case development
        /// The schema is fixed by deploying development's.
        case production
    }

    /// A signed-in user's session. Persist it (it is `Codable`) to stay signed in across launches,
    /// and pass it back to ``Container/init(identifier:serverURL:apiToken:environment:session:configuration:)``.
    public struct Session: Hashable, Sendable, Codable {
        /// The token sent as `ckWebAuthToken`.
        public var webAuthToken: String
        /// The signed-in user's record name.
        public var userRecordName: String
        /// When the server stops accepting the token.
        public var expirationDate: Date

        /// Creates a session.
        public init(webAuthToken: String, userRecordName: String, expirationDate: Date) {
            self.webAuthToken = webAuthToken
            self.userRecordName = userRecordName
            self.expirationDate = expirationDate
        }
    }

    /// Settings of a container's connection to the server. Every property has a documented default.
    public struct Configuration: Sendable {
        /// The longest a connection attempt may take (10 seconds by default).
        public var connectTimeout: Duration
        /// The longest one HTTP request may take, from sending to the last byte of the answer
        /// (60 seconds by default). Retries each get this long.
        public var requestTimeout: Duration
        /// How transient failures are retried.
        public var retryPolicy: RetryPolicy
        /// An identifier of this device, sent with every request (`X-Stratus-Device-ID`), stored in
        /// the `modified` stamps of the records it saves, and used to spare it notifications of its
        /// own changes. `nil` (the default) makes a new one for each `Container`; give a stable one
        /// (saved with the app's data) so a device is recognised across launches.
        public var deviceID: String?
        /// Where downloaded asset files are kept, named by checksum. `nil` (the default) uses a
        /// `stratus-assets` folder in the temporary directory.
        public var assetCacheDirectory: URL?
        /// Whether records fetched with asset fields get their files downloaded (the default), so
        /// that each ``Asset/fileURL`` is a local file.
        public var downloadsAssets: Bool
        /// Where the SDK logs requests, retries and failures; logging is off by default.
        public var logger: Logger
        /// How ``Container/notifications()`` reaches the server.
        public var pushTransport: PushTransport
        /// The clock the SDK waits on between retries and push reconnections (`ContinuousClock` by
        /// default; tests pass a clock that moves time instead of waiting for it).
        public var clock: any Clock<Duration>
        /// What carries requests to the server: `nil` (the default) for an HTTP client over the
        /// network; a transport of the app's (a server in the same process, in tests) otherwise.
        public var httpTransport: (any HTTPTransport)?
        /// A server-to-server key to sign every request to the databases with, for a backend
        /// working without a user (`nil` by default): such a container reaches the public database
        /// only, as the key's own user, and signs nobody in.
        public var serverToServerKey: ServerToServerKey?

        /// How the push channel reaches the server.
        public enum PushTransport: Sendable, Hashable {
            /// A WebSocket, falling back to long polls when the network refuses WebSockets (the default).
            case automatic
            /// Long polls over plain HTTP only, for networks known to refuse WebSockets.
            case longPolling
        }

        /// Creates a configuration.
        public init(
            connectTimeout: Duration = .seconds(10), requestTimeout: Duration = .seconds(60),
            retryPolicy: RetryPolicy = RetryPolicy(), deviceID: String? = nil, assetCacheDirectory: URL? = nil,
            downloadsAssets: Bool = true,
            logger: Logger = Logger(label: "stratus", factory: { _ in SwiftLogNoOpLogHandler() }),
            pushTransport: PushTransport = .automatic, clock: any Clock<Duration> = ContinuousClock(),
            httpTransport: (any HTTPTransport)? = nil, serverToServerKey: ServerToServerKey? = nil
        ) {
            self.httpTransport = httpTransport
            self.serverToServerKey = serverToServerKey
            self.pushTransport = pushTransport
            self.clock = clock
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.retryPolicy = retryPolicy
            self.deviceID = deviceID
            self.assetCacheDirectory = assetCacheDirectory
            self.downloadsAssets = downloadsAssets
            self.logger = logger
        }
    }

    /// Whether a user is signed in (CloudKit's `CKAccountStatus`).
    public enum AccountStatus: Int, Sendable, Hashable {
        /// The status could not be determined.
        case couldNotDetermine = 0
        /// A user is signed in and the server accepts the session.
        case available = 1
        /// Not used by Stratus.
        case restricted = 2
        /// No user is signed in, or the session expired or was signed out.
        case noAccount = 3
        /// Not used by Stratus.
        case temporarilyUnavailable = 4
    }

    /// The container's identifier, such as `iCloud.com.example.notes`.
    public let containerIdentifier: String
    /// The environment this object reads and writes.
    public let environment: Environment
    let connection: Connection
    /// The Web Push key ``webPushPublicKey()`` answered, once it answered one.
    let webPushPublicKeyAnswered = Mutex<String?>(nil)

    /// The settings the container was created with.
    public var configuration: Configuration { connection.configuration }

    /// A container on the server at `serverURL`.
    ///
    /// - Parameters:
    ///   - identifier: The container's identifier.
    ///   - serverURL: The server's base URL, such as `http://127.0.0.1:8080`.
    ///   - apiToken: An API token of the container (`stratus admin create-token`).
    ///   - environment: `.development` (the default) or `.production`.
    ///   - session: A session saved from an earlier sign-in, to stay signed in.
    ///   - configuration: Timeouts, retries, device ID, asset cache and logger.
    public init(
        identifier: String, serverURL: URL, apiToken: String, environment: Environment = .development,
        session: Session? = nil, configuration: Configuration = Configuration()
    ) {
        containerIdentifier = identifier
        self.environment = environment
        connection = Connection(
            serverURL: serverURL, containerIdentifier: identifier, environment: environment, apiToken: apiToken,
            session: session, configuration: configuration)
    }

    /// The container's public database, shared by every user of the app.
    public var publicCloudDatabase: Database { Database(scope: .public, container: self) }
    /// The signed-in user's private database.
    public var privateCloudDatabase: Database { Database(scope: .private, container: self) }
    /// The signed-in user's shared database: zones other users share with them.
    public var sharedCloudDatabase: Database { Database(scope: .shared, container: self) }

    /// The database of `scope`.
    public func database(with scope: Database.Scope) -> Database { Database(scope: scope, container: self) }

    /// The current session; `nil` when no user is signed in.
    public var session: Session? { connection.session }

    /// Whether a user is signed in and the server still accepts the session.
    public func accountStatus() async throws -> AccountStatus {
        guard session != nil else { return .noAccount }
        do {
            _ = try await connection.call(.database(.private, Endpoints.usersCurrent.erased), as: CurrentUserResponse.self)
            return .available
        } catch let error as CloudError where error.code == .notAuthenticated {
            return .noAccount
        }
    }

    /// Creates an account and signs it in; returns the new user's record ID.
    ///
    /// - Throws: ``CloudError`` `permissionFailure` when the container does not allow sign-up,
    ///   `constraintViolation` when the username is taken, `invalidArguments` naming the broken rule.
    @discardableResult
    public func signUp(username: String, password: String) async throws -> Record.ID {
        try await start(
            connection.call(
                .container(Endpoints.signUp.erased), body: PasswordCredentials(username: username, password: password),
                idempotent: false, as: WebAuthSession.self))
    }

    /// Signs in with a username and password; returns the user's record ID.
    @discardableResult
    public func signIn(username: String, password: String) async throws -> Record.ID {
        try await start(
            connection.call(
                .container(Endpoints.signIn.erased), body: PasswordCredentials(username: username, password: password),
                idempotent: true, as: WebAuthSession.self))
    }

    /// Signs in with a web auth token from the server's sign-in page; checks it with the server and
    /// returns the user's record ID.
    @discardableResult
    public func signIn(webAuthToken: String) async throws -> Record.ID {
        let user = try await connection.call(
            .database(.private, Endpoints.usersCurrent.erased), token: webAuthToken, as: CurrentUserResponse.self)
        // The server does not say when a token expires; sessions last at least this long.
        let capabilities = try await connection.capabilities()
        connection.session = Session(
            webAuthToken: webAuthToken, userRecordName: user.userRecordName,
            expirationDate: Date().addingTimeInterval(Double(capabilities.sessionLifetimeSeconds)))
        return Record.ID(recordName: user.userRecordName)
    }

    /// Ends the session on the server and forgets it here.
    public func signOut() async throws {
        guard session != nil else { return }
        do {
            _ = try await connection.call(.container(Endpoints.signOut.erased), body: EmptyObject(), idempotent: true, as: JSONValue.self)
        } catch let error as CloudError where error.code == .notAuthenticated {
            // Already ended on the server.
        }
        connection.session = nil
    }

    /// The signed-in user's record ID (CloudKit's `userRecordID()`).
    public func userRecordID() async throws -> Record.ID {
        let user = try await connection.call(.database(.private, Endpoints.usersCurrent.erased), as: CurrentUserResponse.self)
        return Record.ID(recordName: user.userRecordName)
    }

    /// The limits the server enforces, read once from its capabilities endpoint and cached.
    public func serverLimits() async throws -> ServerLimits {
        ServerLimits(try await connection.capabilities().limits)
    }

    func start(_ session: WebAuthSession) -> Record.ID {
        connection.session = Session(
            webAuthToken: session.ckWebAuthToken, userRecordName: session.userRecordName,
            expirationDate: Date(timeIntervalSince1970: Double(session.expires) / 1000))
        return Record.ID(recordName: session.userRecordName)
    }
}

/// The limits a server enforces; the SDK splits batches to fit them.
public struct ServerLimits: Hashable, Sendable {
    /// Operations in one modify request.
    public var maxOperationsPerRequest: Int
    /// Records in one answer page.
    public var maxRecordsPerResponse: Int
    /// Bytes of one record's fields.
    public var maxRecordSizeBytes: Int
    /// Bytes of one asset file.
    public var maxAssetSizeBytes: Int
    /// Bytes of one request body.
    public var maxRequestBodyBytes: Int

    init(_ limits: Limits) {
        maxOperationsPerRequest = limits.maxOperationsPerRequest
        maxRecordsPerResponse = limits.maxRecordsPerResponse
        maxRecordSizeBytes = limits.maxRecordSizeBytes
        maxAssetSizeBytes = limits.maxAssetSizeBytes
        maxRequestBodyBytes = limits.maxRequestBodyBytes
    }
}

/// `{}`, the body of requests that need none.
struct EmptyObject: JSONWritable {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.endObject()
    }
}
