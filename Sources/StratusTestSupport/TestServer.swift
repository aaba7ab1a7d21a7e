package import NIOHTTP1
import AsyncHTTPClient
package import Foundation
import Logging
import NIOCore
import StratusModel
package import StratusServer
import StratusPostgres
import StratusSQLite
package import StratusStorage
import Synchronization
import Testing

/// A real Stratus server on a loopback port over a real SQLite file in a temporary directory, or,
/// when `STRATUS_TEST_STORAGE=postgres`, over a new database on the test PostgreSQL server
/// (`scripts/test` runs the server suites both ways).
package final class TestServer: Sendable {
    package let directory: URL
    package let storage: any StratusStorage
    package let credentials: ServerCredentials
    package let configuration: ServerConfiguration
    private let server: EmbeddedServer
    /// Tells this server's in-process answers from those of a later server on its port.
    private let id: UUID
    /// Whether the containers ``makeContainer(device:session:retryPolicy:logger:clock:serverURL:inProcess:)``
    /// makes reach the server in this process (``InProcessHTTPTransport``) unless told otherwise.
    package let clientsInProcess: Bool
    /// The server that ``restart()`` started on this one's data, which ``stopAndRemove()`` stops too.
    private let successor = Mutex<TestServer?>(nil)

    package var baseURL: String { server.baseURL }

    package var container: String { credentials.container }
    package var apiToken: String { credentials.apiToken }

    /// Starts a server; pass `directory` to reuse the data of a stopped one.
    package static func start(
        directory: URL? = nil, configuration: ServerConfiguration = ServerConfiguration(port: 0, passwordHashCost: 4),
        clientsInProcess: Bool = false
    ) async throws -> TestServer {
        let directory = directory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("stratus-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = configuration
        configuration.assetsDirectory = configuration.assetsDirectory ?? directory.appendingPathComponent("assets").path
        let storage = try await openStorage(in: directory)
        var logger = Logger(label: "stratus-test")
        logger.logLevel = .warning
        let server = try await EmbeddedServer.start(
            storage: storage, configuration: configuration,
            credentialsFile: directory.appendingPathComponent("credentials.json"), logger: logger)
        let id = UUID()
        InProcessHTTPTransport.serve(port: server.port, server: id, with: server.respond)
        return TestServer(
            id: id,
            directory: directory, storage: storage, server: server,
            credentials: try #require(server.bootstrap?.credentials), configuration: configuration,
            clientsInProcess: clientsInProcess)
    }

    /// A transport that hands requests to the server on this one's port in this process, through
    /// its router.
    package var inProcessTransport: InProcessHTTPTransport {
        var logger = Logger(label: "stratus-test")
        logger.logLevel = .warning
        return InProcessHTTPTransport(logger: logger)
    }

    /// Whether test servers run on PostgreSQL.
    package static var usesPostgres: Bool { ProcessInfo.processInfo.environment["STRATUS_TEST_STORAGE"] == "postgres" }

    /// The storage of a data directory: its SQLite file, or the PostgreSQL database it names (a new
    /// one on first use).
    private static func openStorage(in directory: URL) async throws -> any StratusStorage {
        guard usesPostgres else {
            return try SQLiteStorage(path: directory.appendingPathComponent("stratus.sqlite").path)
        }
        let urlFile = directory.appendingPathComponent("postgres-url")
        let url: String
        if let saved = try? String(contentsOf: urlFile, encoding: .utf8) {
            url = saved
        } else {
            url = try await TestPostgres.createDatabase().url
            try url.write(to: urlFile, atomically: true, encoding: .utf8)
        }
        return try PostgresStorage(url: url, maximumConnections: 8)
    }

    private init(
        id: UUID, directory: URL, storage: any StratusStorage, server: EmbeddedServer, credentials: ServerCredentials,
        configuration: ServerConfiguration, clientsInProcess: Bool
    ) {
        self.clientsInProcess = clientsInProcess
        self.id = id
        self.directory = directory
        self.storage = storage
        self.server = server
        self.credentials = credentials
        self.configuration = configuration
    }

    /// Stops the server and its storage gracefully and waits for them.
    package func stop() async throws {
        InProcessHTTPTransport.stopServing(port: server.port, server: id)
        try await server.stop()
    }

    /// A new server on this stopped server's port and data: the server after a restart. Stopping
    /// and removing this server (as ``withServer(_:_:)`` does at the end) stops that one too.
    package func restart() async throws -> TestServer {
        var configuration = configuration
        configuration.port = try #require(URL(string: baseURL)?.port)
        let restarted = try await TestServer.start(
            directory: directory, configuration: configuration, clientsInProcess: clientsInProcess)
        successor.withLock { $0 = restarted }
        return restarted
    }

    /// Stops the server and the servers restarted from it, and removes their data.
    package func stopAndRemove() async throws {
        try await stop()
        if let restarted = successor.withLock({ $0 }) { try await restarted.stopAndRemove() }
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: HTTP

    /// A response: status and parsed JSON body.
    package struct Reply: @unchecked Sendable {
        package let status: Int
        package let body: [String: Any]
        package let text: String
        package let headers: HTTPHeaders

        package init(status: Int, body: [String: Any], text: String, headers: HTTPHeaders) {
            self.status = status
            self.body = body
            self.text = text
            self.headers = headers
        }

        package var reason: String { body["reason"] as? String ?? "" }
        package var code: String? { body["serverErrorCode"] as? String }
        package var records: [[String: Any]] { body["records"] as? [[String: Any]] ?? [] }
        /// The reason of the first record's error, or "".
        package var firstReason: String { records.first?["reason"] as? String ?? "" }
        package var zones: [[String: Any]] { body["zones"] as? [[String: Any]] ?? [] }
        package var syncToken: String? { body["syncToken"] as? String }
        package var moreComing: Bool? { body["moreComing"] as? Bool }
    }

    /// A client that hands back a redirect instead of following it (kept for the process's life).
    private static let redirectRefusingClient = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    package func request(
        _ method: HTTPMethod, _ path: String, body: Any? = nil, rawBody: String? = nil,
        query: [String: String] = [:], headers: [String: String] = [:], followingRedirects: Bool = true
    ) async throws -> Reply {
        var components = URLComponents(string: baseURL + path)!
        components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        var request = HTTPClientRequest(url: components.url!.absoluteString)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        // The shared client inflates answers only up to 25 times their size, which a page of
        // look-alike test records exceeds; tests that want gzip ask for it.
        if headers["Accept-Encoding"] == nil { request.headers.add(name: "Accept-Encoding", value: "identity") }
        if let rawBody {
            request.body = .bytes(ByteBuffer(string: rawBody))
        } else if let body {
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let client = followingRedirects ? HTTPClient.shared : Self.redirectRefusingClient
        // Only a guard against a hang: a loaded machine (a CI run beside a build) once took more
        // than a minute over a batch of 200 subscriptions.
        let response = try await client.execute(request, timeout: .seconds(300))
        let buffer = try await response.body.collect(upTo: 256 << 20)
        let text = String(buffer: buffer)
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))) as? [String: Any] ?? [:]
        return Reply(status: Int(response.status.code), body: json, text: text, headers: response.headers)
    }

    /// A call to `/database/1/{container}/development/{database}/{operation}` as `user`.
    package func database(
        _ database: String, _ operation: String, _ body: Any? = nil, user: String? = nil,
        environment: String = "development", method: HTTPMethod? = nil, headers: [String: String] = [:]
    ) async throws -> Reply {
        var query = ["ckAPIToken": apiToken]
        if let user { query["ckWebAuthToken"] = user }
        return try await request(
            method ?? (body == nil ? .GET : .POST), "/database/1/\(container)/\(environment)/\(database)/\(operation)",
            body: body, query: query, headers: headers)
    }

    /// Registers a server-to-server key's public half through the admin API; returns the key ID
    /// and the key's user.
    package func registerServerKey(_ publicKeyPEM: String, environment: String = "development") async throws
        -> (keyID: String, userRecordName: String)
    {
        let reply = try await request(
            .POST, "/admin/1/containers/\(container)/keys", body: ["environment": environment, "publicKey": publicKeyPEM],
            headers: ["Authorization": "Bearer \(credentials.adminToken)"])
        #expect(reply.status == 201, "\(reply.text)")
        return (try #require(reply.body["keyID"] as? String), try #require(reply.body["userRecordName"] as? String))
    }

    /// Signs up a new user and returns its web auth token and record name.
    package func signUp(_ username: String) async throws -> (token: String, recordName: String) {
        let reply = try await request(
            .POST, "/auth/1/\(container)/signup", body: ["username": username, "password": "correct horse"],
            query: ["ckAPIToken": apiToken])
        #expect(reply.status == 200, "\(reply.text)")
        return (try #require(reply.body["ckWebAuthToken"] as? String), try #require(reply.body["userRecordName"] as? String))
    }

    /// Creates a custom zone in the user's private database.
    package func createZone(_ name: String, user: String) async throws {
        let reply = try await database(
            "private", "zones/modify", ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": name]]]]],
            user: user)
        #expect(reply.status == 200 && reply.zones.first?["serverErrorCode"] == nil, "\(reply.text)")
    }

    /// Runs `records/modify` with the given operations in a zone.
    package func modify(
        _ operations: [[String: Any]], zone: String? = nil, user: String?, database: String = "private",
        environment: String = "development", atomic: Bool? = nil, extra: [String: Any] = [:], device: String? = nil
    ) async throws -> Reply {
        var body: [String: Any] = ["operations": operations]
        if let zone { body["zoneID"] = ["zoneName": zone] }
        if let atomic { body["atomic"] = atomic }
        body.merge(extra) { $1 }
        return try await self.database(
            database, "records/modify", body, user: user, environment: environment,
            headers: device.map { ["X-Stratus-Device-ID": $0] } ?? [:])
    }

    /// Reads a zone's whole change feed from `token`.
    package func readFeed(zone: String, user: String, token: String? = nil, limit: Int? = nil) async throws
        -> (records: [[String: Any]], token: String, pages: Int)
    {
        var token = token
        var records: [[String: Any]] = []
        var pages = 0
        while true {
            var body: [String: Any] = ["zoneID": ["zoneName": zone]]
            if let token { body["syncToken"] = token }
            if let limit { body["resultsLimit"] = limit }
            let reply = try await database("private", "records/changes", body, user: user)
            try #require(reply.status == 200, "\(reply.text)")
            // The head repeats where the next page starts, for clients that read ahead.
            #expect(reply.headers.first(name: "X-Stratus-Sync-Token") == reply.syncToken)
            #expect(reply.headers.first(name: "X-Stratus-More-Coming") == (reply.moreComing == true ? "true" : "false"))
            records += reply.records
            token = reply.syncToken
            pages += 1
            if reply.moreComing != true { return (records, try #require(token), pages) }
        }
    }
}

/// Builds a `records/modify` operation.
package func operation(
    _ type: String, _ name: String? = nil, recordType: String? = "Note", tag: String? = nil,
    fields: [String: Any]? = nil
) -> [String: Any] {
    var record: [String: Any] = [:]
    if let name { record["recordName"] = name }
    if let recordType { record["recordType"] = recordType }
    if let tag { record["recordChangeTag"] = tag }
    if let fields { record["fields"] = fields }
    return ["operationType": type, "record": record]
}
