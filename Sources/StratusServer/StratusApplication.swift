public import Hummingbird
public import Logging
import NIOCore
import StratusModel
public import StratusStorage

/// Builds the Stratus HTTP application over a storage backend.
public enum StratusApplication {
    /// Builds the application. `onServerRunning` receives the bound port (useful with port 0).
    public static func make(
        storage: any StratusStorage, configuration: ServerConfiguration, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws -> some ApplicationProtocol {
        let secret = try await storage.initializeSetting(
            ServerBootstrap.tokenSecretSetting, to: SyncTokenCodec.makeSecret())
        let tokens = SyncTokenCodec(secret: secret)
        let assets = configuration.assetsDirectory.map {
            AssetStore(directory: $0, storage: storage, tokens: tokens, graceSeconds: configuration.assetGraceSeconds)
        }
        let router = makeRouter(storage: storage, configuration: configuration, tokens: tokens, assets: assets)
        return Application(
            router: router,
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "Stratus"),
            services: [Housekeeping(storage: storage, assets: assets, configuration: configuration, logger: logger)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }

    /// The router with every endpoint; also used to check the OpenAPI document against the routes.
    public static func makeRouter(
        storage: any StratusStorage, configuration: ServerConfiguration, tokens: SyncTokenCodec
    ) -> Router<BasicRequestContext> {
        makeRouter(
            storage: storage, configuration: configuration, tokens: tokens,
            assets: configuration.assetsDirectory.map {
                AssetStore(directory: $0, storage: storage, tokens: tokens, graceSeconds: configuration.assetGraceSeconds)
            })
    }

    static func makeRouter(
        storage: any StratusStorage, configuration: ServerConfiguration, tokens: SyncTokenCodec, assets: AssetStore?
    ) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: ErrorMiddleware())
        if let rateLimit = configuration.rateLimit {
            router.add(middleware: RateLimitMiddleware(limiter: RateLimiter(limit: rateLimit)))
        }
        let accounts = AccountService(storage: storage, configuration: configuration)
        let authenticator = Authenticator(accounts: accounts, configuration: configuration)
        DatabaseEndpoints(
            storage: storage, authenticator: authenticator, configuration: configuration, tokens: tokens, assets: assets
        ).addRoutes(to: router)
        AuthEndpoints(accounts: accounts, authenticator: authenticator, configuration: configuration)
            .addRoutes(to: router)
        AdminEndpoints(storage: storage, accounts: accounts).addRoutes(to: router)
        MetaEndpoints(authenticator: authenticator, configuration: configuration).addRoutes(to: router)
        return router
    }
}
