public import Foundation
public import Logging
import ServiceLifecycle
public import StratusStorage

/// A Stratus server running inside the current process, for tests, benchmarks and apps that embed
/// the server. It runs its storage and the server in one service group, listens on
/// `configuration.port` (0 picks a free port) until ``stop()``, and stops the storage after it.
public final class EmbeddedServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// The server's base URL, e.g. `http://127.0.0.1:53211`.
    public let baseURL: String
    /// What the first-start preparation found or made, when the server was given a credentials file.
    public let bootstrap: ServerBootstrap.Outcome?
    /// Answers a request in this process, through the server's router and middleware, without a
    /// socket (StratusTestSupport's `InProcessHTTPTransport` hands the SDK's requests to it).
    package let respond: StratusServerService.InProcessResponder
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(
        port: Int, baseURL: String, bootstrap: ServerBootstrap.Outcome?, respond: @escaping StratusServerService.InProcessResponder,
        group: ServiceGroup, task: Task<Void, any Error>
    ) {
        self.respond = respond
        self.port = port
        self.baseURL = baseURL
        self.bootstrap = bootstrap
        self.group = group
        self.task = task
    }

    /// Starts `storage` and a server over it, and returns once the server accepts connections. With
    /// `credentialsFile`, a first start creates the admin token, the default container and its API
    /// token there (``bootstrap``).
    public static func start(
        storage: any StratusStorage, configuration: ServerConfiguration, credentialsFile: URL? = nil,
        logger: Logger = Logger(label: "stratus")
    ) async throws -> EmbeddedServer {
        let (started, continuation) = AsyncStream<StratusServerService.Started>.makeStream()
        let server = StratusServerService(
            storage: storage, configuration: configuration, credentialsFile: credentialsFile, logger: logger
        ) {
            continuation.yield($0)
            continuation.finish()
        }
        let group = ServiceGroup(services: [storage, server], gracefulShutdownSignals: [], logger: logger)
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        var iterator = started.makeAsyncIterator()
        guard let first = await iterator.next() else {
            try await task.value
            throw CancellationError()
        }
        return EmbeddedServer(
            port: first.port, baseURL: "\(configuration.scheme)://\(configuration.host):\(first.port)", bootstrap: first.bootstrap,
            respond: first.respond, group: group, task: task)
    }

    /// Stops accepting requests, finishes the ones in flight, stops the storage, and waits for both.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}
