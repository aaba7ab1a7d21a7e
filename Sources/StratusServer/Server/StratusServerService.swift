public import Foundation
package import Hummingbird
public import Logging
public import ServiceLifecycle
public import StratusStorage
import Synchronization

/// A Stratus server as one service, run in a service group after its storage (whose calls wait
/// until it is ready): on start it prepares the storage for serving (``ServerBootstrap``, when given
/// a credentials file), builds the application and serves until the group shuts down.
public struct StratusServerService: Service, CustomStringConvertible {
    /// What the server reports once it listens.
    public struct Started: Sendable {
        /// The port it listens on.
        public var port: Int
        /// What the first-start preparation found or made, when it ran.
        public var bootstrap: ServerBootstrap.Outcome?
        /// Answers a request in this process: the server's router and middleware, as a request
        /// over a socket reaches them, without one.
        package var respond: InProcessResponder
    }

    /// Hands a request to the running server's router and middleware without a connection.
    package typealias InProcessResponder = @Sendable (Request, StratusRequestContext) async throws -> Response

    private let storage: any StratusStorage
    private let configuration: ServerConfiguration
    private let credentialsFile: URL?
    private let logger: Logger
    private let onStarted: @Sendable (Started) async -> Void

    /// A server over `storage`. With `credentialsFile`, a first start creates the admin token, the
    /// default container and its API token there. `onStarted` hears once it listens.
    public init(
        storage: any StratusStorage, configuration: ServerConfiguration, credentialsFile: URL?, logger: Logger,
        onStarted: @escaping @Sendable (Started) async -> Void = { _ in }
    ) {
        self.storage = storage
        self.configuration = configuration
        self.credentialsFile = credentialsFile
        self.logger = logger
        self.onStarted = onStarted
    }

    /// Its name alone: service groups log their services, and the configuration holds secrets.
    public var description: String { "StratusServerService" }

    /// Prepares the storage, then serves until the service group shuts down.
    public func run() async throws {
        var bootstrap: ServerBootstrap.Outcome?
        if let credentialsFile {
            bootstrap = try await ServerBootstrap.prepare(
                storage: storage, configuration: configuration, credentialsFile: credentialsFile)
        }
        let prepared = bootstrap
        let onStarted = onStarted
        // The responder is built before the server listens, which is when `onStarted` hears of it.
        let responder = Mutex<RouterResponder<StratusRequestContext>?>(nil)
        let app = try await StratusApplication.make(storage: storage, configuration: configuration, logger: logger) {
            port in
            guard let built = responder.withLock({ $0 }) else { return }
            await onStarted(Started(port: port, bootstrap: prepared) { try await built.respond(to: $0, context: $1) })
        }
        let built = try await app.responder
        responder.withLock { $0 = built }
        try await app.run()
    }
}
