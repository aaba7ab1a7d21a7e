import Foundation
import HTTPTypes
package import Hummingbird
import HummingbirdCore
package import Logging
import NIOCore
import StratusModel
package import StratusStorage

/// Builds the Stratus HTTP application over a storage backend.
package enum StratusApplication {
    /// Builds the application. `onServerRunning` receives the bound port (useful with port 0).
    package static func make(
        storage: any StratusStorage, configuration: ServerConfiguration, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws -> Application<RouterResponder<StratusRequestContext>> {
        let secret = try await storage.initializeSetting(
            ServerBootstrap.tokenSecretSetting, to: SyncTokenCodec.makeSecret())
        let tokens = SyncTokenCodec(secret: secret)
        let credentials = CredentialCaches(clock: configuration.clock)
        let devicePush = DevicePushTransport(
            storage: storage, credentials: PushCredentialStore(storage: storage, clock: configuration.clock),
            configuration: configuration, logger: logger)
        let hub = PushHub(
            storage: storage, bus: storage.messageBus, credentials: credentials, configuration: configuration, logger: logger,
            transports: [devicePush])
        let housekeeping = HousekeepingStatus()
        let routers = makeRouters(
            storage: storage, configuration: configuration, tokens: tokens, hub: hub, devicePush: devicePush,
            credentials: credentials, housekeeping: housekeeping)
        let heartbeat = TimeAmount.seconds(configuration.pushHeartbeatSeconds)
        let headTimeout = TimeAmount(configuration.requestHeadTimeout)
        let http = HTTP1Channel.Configuration(idleTimeout: TimeAmount(configuration.idleTimeout))
        let admission = ConnectionAdmission(
            maxConnections: configuration.maxConnections, maxPerClient: configuration.maxConnectionsPerClient,
            maxBodiesPerClient: configuration.bodyPace.maxBodiesPerClient, unlimitedAddresses: configuration.trustedProxies,
            metrics: configuration.metrics)
        let push = routers.push
        let tls = try configuration.tls?.serverConfiguration()
        return Application(
            router: routers.http,
            server: HTTPServerBuilder { responder in
                let channel = PushServerChannel(
                    responder: responder, push: push, heartbeat: heartbeat, requestHeadTimeout: headTimeout,
                    admission: admission, admitsConnections: tls == nil, pace: configuration.bodyPace, http: http)
                return if let tls {
                    try NegotiatingTLSChannel(http1: channel, idleTimeout: configuration.idleTimeout, tls: tls)
                } else {
                    channel
                }
            },
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "Stratus"),
            services: [
                Housekeeping(
                    storage: storage, assets: routers.assets, configuration: configuration, status: housekeeping,
                    logger: logger),
                hub,
                devicePush,
            ],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }

    /// The router with every HTTP endpoint; also used to check the OpenAPI document against the routes.
    package static func makeRouter(
        storage: any StratusStorage, configuration: ServerConfiguration, tokens: SyncTokenCodec
    ) -> Router<StratusRequestContext> {
        let credentials = CredentialCaches(clock: configuration.clock)
        let logger = Logger(label: "stratus")
        return makeRouters(
            storage: storage, configuration: configuration, tokens: tokens,
            hub: PushHub(
                storage: storage, bus: storage.messageBus, credentials: credentials, configuration: configuration,
                logger: logger),
            devicePush: DevicePushTransport(
                storage: storage, credentials: PushCredentialStore(storage: storage, clock: configuration.clock),
                configuration: configuration, logger: logger),
            credentials: credentials, housekeeping: HousekeepingStatus()
        ).http
    }

    /// The HTTP router, the push endpoints (which also authenticate WebSocket upgrades), and the
    /// asset store. `credentials` are the credential caches `hub` shares; `devicePush` is the hub's
    /// transport through the platforms' push services.
    static func makeRouters(
        storage: any StratusStorage, configuration: ServerConfiguration, tokens: SyncTokenCodec, hub: PushHub,
        devicePush: DevicePushTransport, credentials: CredentialCaches, housekeeping: HousekeepingStatus
    ) -> (http: Router<StratusRequestContext>, push: PushEndpoints, assets: AssetStore?) {
        let requestLog = RequestLog()
        let directory = configuration.assetsDirectory.map(DirectoryAssetBlobStore.init)
        let blobs: (any AssetBlobStore)? =
            if let bucket = configuration.assetsBucket {
                S3AssetBlobStore(
                    bucket: bucket,
                    stagingDirectory: directory?.stagingDirectory
                        ?? FileManager.default.temporaryDirectory.appendingPathComponent("stratus-uploads").path)
            } else {
                directory
            }
        let assets = blobs.map {
            AssetStore(
                blobs: $0, storage: storage, tokens: tokens, graceSeconds: configuration.assetGraceSeconds,
                maxTransfers: configuration.maxConnections, clock: configuration.clock)
        }
        // HEAD answers as GET without the body (RFC 9110 §9.3.2) on every GET route.
        let router = Router(context: StratusRequestContext.self, options: .autoGenerateHeadEndpoints)
        // Web apps on other origins call the API from the browser, as CloudKit JS does. Credentials
        // travel in the query or in signed headers, never in cookies, so any origin may read answers.
        router.add(
            middleware: CORSMiddleware(
                allowOrigin: .all,
                allowHeaders: [
                    .accept, .contentType, .contentEncoding, .authorization, .stratusDeviceID, .cloudKitKeyID,
                    .cloudKitDate, .cloudKitSignature,
                ],
                allowMethods: [.get, .post, .put, .patch, .delete, .head, .options],
                exposedHeaders: [
                    HTTPField.Name.stratusSyncToken.canonicalName, HTTPField.Name.stratusMoreComing.canonicalName,
                    HTTPField.Name.retryAfter.canonicalName, HTTPField.Name.allow.canonicalName,
                    HTTPField.Name.stratusRequestID.canonicalName,
                ],
                maxAge: .seconds(600)))
        router.add(
            middleware: ObservabilityMiddleware(
                metrics: configuration.metrics, log: requestLog, audit: storage, clock: configuration.clock,
                tracesRequests: configuration.tracesRequests))
        router.add(middleware: ResponseCompression())
        router.add(
            middleware: RequestBodyBudgetMiddleware(
                budget: RequestBodyBudget(
                    capacity: max(configuration.maxBufferedRequestBytes, configuration.limits.maxRequestBodyBytes),
                    level: configuration.metrics.bufferedRequestBytes)))
        let routes = RouteTable()
        router.add(middleware: ErrorMiddleware(routes: routes))
        router.add(middleware: NullCharacterMiddleware())
        let accounts = AccountService(
            storage: storage, configuration: configuration, credentials: credentials, announce: { await hub.revoke($0) })
        let console = ConsoleSessions(clock: configuration.clock)
        let credential = AdminCredential(
            storage: storage, console: console, limits: configuration.signInLimits, clock: configuration.clock)
        router.add(
            middleware: AuthenticationMiddleware(
                accounts: accounts, console: console, limiter: configuration.rateLimit.map { RateLimiter(limit: $0, clock: configuration.clock) },
                trustedProxies: Set(configuration.trustedProxies.map(AuthenticationMiddleware.unmapped)), clock: configuration.clock,
                maxBodyBytes: configuration.limits.maxRequestBodyBytes))
        let authenticator = Authenticator(configuration: configuration)
        let quotas = QuotaKeeper(
            storage: storage, defaults: configuration.quotas, clock: configuration.clock,
            graceSeconds: configuration.assetGraceSeconds)
        let writer = ChangeWriter(storage: storage, hub: hub)
        DatabaseEndpoints(
            storage: storage, authenticator: authenticator, configuration: configuration, tokens: tokens, assets: assets,
            changeWriter: writer, quotas: quotas, prefetch: FeedPagePrefetch(clock: configuration.clock)
        ).addRoutes(to: router)
        ShareEndpoints(storage: storage, authenticator: authenticator, configuration: configuration, changeWriter: writer)
            .addRoutes(to: router)
        SubscriptionEndpoints(storage: storage, authenticator: authenticator, configuration: configuration, hub: hub)
            .addRoutes(to: router)
        let push = PushEndpoints(
            storage: storage, accounts: accounts, authenticator: authenticator, hub: hub, devicePush: devicePush,
            configuration: configuration,
            refusedPolls: FailureBackoff(maximumLockSeconds: 60, clock: configuration.clock))
        push.addRoutes(to: router)
        let signInMethods = IdentityProviderDirectory(storage: storage, clock: configuration.clock)
        AuthEndpoints(
            accounts: accounts, authenticator: authenticator, configuration: configuration, directory: signInMethods,
            settings: storage
        ).addRoutes(to: router)
        UserDiscoveryEndpoints(storage: storage, authenticator: authenticator, limits: configuration.limits)
            .addRoutes(to: router)
        AdminEndpoints(
            storage: storage, accounts: accounts, credential: credential, quotas: quotas,
            pushCredentials: devicePush.credentials, signInMethods: signInMethods, clock: configuration.clock
        ).addRoutes(to: router)
        MetaEndpoints(authenticator: authenticator, configuration: configuration).addRoutes(to: router)
        MetricsEndpoint(storage: storage, configuration: configuration, hub: hub, credential: credential)
            .addRoutes(to: router)
        ConsoleEndpoints(
            storage: storage, configuration: configuration, credential: credential, log: requestLog, hub: hub,
            devicePush: devicePush, housekeeping: housekeeping, quotas: quotas, signInMethods: signInMethods
        ).addRoutes(to: router)
        routes.record(router.routes)
        return (router, push, assets)
    }
}
