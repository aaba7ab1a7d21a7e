import Logging
import ServiceLifecycle
public import StratusStorage

/// A Stratus server running inside the current process, for tests, benchmarks and apps that embed
/// the server. It listens on `configuration.port` (0 picks a free port) until ``stop()``.
public final class EmbeddedServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// The server's base URL, e.g. `http://127.0.0.1:53211`.
    public let baseURL: String
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(port: Int, baseURL: String, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.baseURL = baseURL
        self.group = group
        self.task = task
    }

    /// Starts a server over `storage` and returns once it accepts connections.
    public static func start(
        storage: any StratusStorage, configuration: ServerConfiguration, logger: Logger = Logger(label: "stratus")
    ) async throws -> EmbeddedServer {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = try await StratusApplication.make(storage: storage, configuration: configuration, logger: logger) {
            continuation.yield($0)
            continuation.finish()
        }
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value
            throw CancellationError()
        }
        return EmbeddedServer(port: port, baseURL: "http://\(configuration.host):\(port)", group: group, task: task)
    }

    /// Stops accepting requests, finishes the ones in flight, and waits for the server to end.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}
