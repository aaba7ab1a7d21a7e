import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import StratusModel
import StratusServer
import StratusSQLite
import StratusStorage

/// A Stratus server over a fresh data directory with one signed-up user, for the query and asset
/// workloads.
struct BenchServer {
    let directory: URL
    let storage: SQLiteStorage
    let server: EmbeddedServer
    let http: HTTPClient
    let credentials: ServerCredentials
    let userRecordName: String
    /// The signed-in user's `ckWebAuthToken`.
    let webAuthToken: String
    /// `?ckAPIToken=…&ckWebAuthToken=…`.
    let tokens: String

    /// The private database's URL in an environment.
    func databaseURL(_ environment: ContainerEnvironment = .development) -> String {
        "\(server.baseURL)/database/1/\(credentials.container)/\(environment.rawValue)/private"
    }
    var locator: DatabaseLocator {
        DatabaseLocator(container: credentials.container, environment: .development, scope: .private, owner: userRecordName)
    }

    /// Starts a server on `host` (loopback by default; every address for the shaped network).
    static func start(durability: SQLiteStorage.Durability, host: String = "127.0.0.1") async throws -> BenchServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let storage = try SQLiteStorage(
            path: directory.appendingPathComponent("stratus.sqlite").path, configuration: .init(durability: durability))
        let configuration = ServerConfiguration(
            host: host, port: 0, passwordHashCost: 4, assetsDirectory: directory.appendingPathComponent("assets").path)
        let credentials = try await ServerBootstrap.prepare(
            storage: storage, configuration: configuration,
            credentialsFile: directory.appendingPathComponent("credentials.json")
        ).credentials!
        var logger = Logger(label: "stratus-bench")
        logger.logLevel = .error
        let server = try await EmbeddedServer.start(storage: storage, configuration: configuration, logger: logger)
        let http = StratusBench.rawHTTPClient()
        let session = try JSONValue.parse(Array(try await StratusBench.post(
            http, "\(server.baseURL)/auth/1/\(credentials.container)/signup?ckAPIToken=\(credentials.apiToken)",
            Array(#"{"username":"bench","password":"load test passphrase"}"#.utf8)).readableBytesView)).object()
        let token: String = try session.decode("ckWebAuthToken")
        return BenchServer(
            directory: directory, storage: storage, server: server, http: http, credentials: credentials,
            userRecordName: try session.decode("userRecordName"), webAuthToken: token,
            tokens: "?ckAPIToken=\(credentials.apiToken)&ckWebAuthToken=\(token)")
    }

    func stop() async throws {
        try await http.shutdown()
        try await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
