public import StratusModel

/// Settings of a Stratus server. Every property has a documented default.
public struct ServerConfiguration: Sendable {
    /// Interface to listen on; `127.0.0.1` by default.
    public var host: String
    /// Port to listen on; `8080` by default, `0` picks a free one.
    public var port: Int
    /// The limits enforced and advertised by the capabilities endpoint.
    public var limits: Limits
    /// How long tombstones of deleted records and zones are kept, in seconds (30 days by default).
    /// A sync token older than the purged tombstones answers `CHANGE_TOKEN_EXPIRED`.
    public var tombstoneHorizonSeconds: Int64
    /// How often tombstones are purged, in seconds (one hour by default).
    public var purgeIntervalSeconds: Int64
    /// How long a web auth token stays valid, in seconds (two weeks by default).
    public var sessionLifetimeSeconds: Int64
    /// The bcrypt cost of password hashes (12 by default; each step doubles the work).
    public var passwordHashCost: UInt8
    /// The URL clients reach the server at, used in sign-in redirects; derived from each request's
    /// `Host` header when `nil`.
    public var publicURL: String?
    /// The directory asset bytes are stored in; without one or an ``assetsBucket`` the server accepts
    /// no assets. Several server instances can share it.
    public var assetsDirectory: String?
    /// The S3-compatible bucket asset bytes are stored in instead of ``assetsDirectory``; `nil` by
    /// default. Uploads are staged while they are hashed in `<assetsDirectory>/tmp` when a directory
    /// is set too, otherwise in the system's temporary directory.
    public var assetsBucket: S3Bucket?
    /// How long an uploaded asset is kept while no record refers to it, in seconds (one day by
    /// default): the time a client has between uploading and saving the record.
    public var assetGraceSeconds: Int64
    /// How much each user of a container, and each container, may hold (``Quotas``' defaults: 10
    /// million records, 10 GiB of records, 20 GiB of assets and 1 GiB of uploads not yet saved per
    /// user; containers unlimited); the admin API sets a container's own.
    public var quotas: Quotas
    /// How many requests each caller may make; unlimited when `nil` (the default). Callers over the
    /// limit get `429 THROTTLED` with `retryAfter`.
    public var rateLimit: RateLimit?
    /// Limits on signing up and on failed sign-ins, which apply whether or not ``rateLimit`` is set.
    public var signInLimits: SignInLimits
    /// Addresses of reverse proxies in front of the server (e.g. `127.0.0.1` for a local nginx);
    /// empty by default. For a request from one of them, the client's address (for rate limits and
    /// sign-in limits) is the last address in `X-Forwarded-For` that is not itself a proxy of this set.
    public var trustedProxies: Set<String>
    /// The clock the server reads the time from (``ServerClock/system`` by default; tests move a
    /// ``ManualClock``).
    public var clock: ServerClock
    /// How often the server pings a push connection, in seconds (30 by default); a device that does
    /// not answer within another period is disconnected.
    public var pushHeartbeatSeconds: Int64
    /// How many notifications wait for one device at most (100 by default); older ones are dropped
    /// and the device is told it missed notifications.
    public var pushQueueLimit: Int
    /// How long a device that disconnected keeps its queue of notifications, in seconds (one hour by
    /// default); a device that reconnects later is told it may have missed notifications.
    public var pushRetentionSeconds: Int64
    /// How long a push token may go unused before it is deleted, in seconds (90 days by default).
    public var pushTokenLifetimeSeconds: Int64
    /// How long a new connection has to send the head of its first request (10 seconds by default):
    /// a connection that sends nothing, or a head too slowly, is closed.
    public var requestHeadTimeout: Duration
    /// How long a connection may stay open between requests (60 seconds by default). A request in
    /// progress (a long poll included) is never cut; push WebSockets follow their heartbeat instead.
    public var idleTimeout: Duration
    /// The most connections the server holds at once (10,000 by default); more are answered `503`
    /// and closed at once.
    public var maxConnections: Int
    /// The most connections one client address holds at once (500 by default; ``trustedProxies`` are
    /// not limited); more are answered `503` and closed at once.
    public var maxConnectionsPerClient: Int
    /// How fast request bodies must arrive, and how many one client network may send at once
    /// (``RequestBodyPace``'s defaults: 15 minutes at most, 1,024 bytes per second on average after
    /// 10 seconds, 64 per network).
    public var bodyPace: RequestBodyPace
    /// The request bytes the server holds in memory at once, summed over every request being read or
    /// handled (256 MiB by default, and never less than `limits.maxRequestBodyBytes`); a request
    /// whose body does not fit is answered `503 TRY_AGAIN_LATER` with `Retry-After`.
    public var maxBufferedRequestBytes: Int
    /// When set, the server answers HTTPS (and WebSockets over TLS) with this certificate, and only
    /// that; URLs it hands out start with `https://`.
    public var tls: TLSIdentity?

    /// What the server counts and measures, exposed at `GET /metrics` (a registry of its own by
    /// default; pass one shared with the storage to see its figures beside the server's).
    public var metrics: ServerMetrics
    /// A token that may read `GET /metrics` besides the admin token, so that a monitoring system
    /// needs no admin rights; `nil` (the default) leaves the admin token alone.
    public var metricsToken: String?

    /// Where the platforms' push services are (APNs, FCM, the browsers' Web Push services), whom to
    /// trust, and how pushes are retried; the real services by default.
    public var pushServices = PushServiceConfiguration()

    /// Whether each request is traced as a span through swift-distributed-tracing (off by default):
    /// `stratus serve --otel` turns it on and exports the spans over OTLP.
    public var tracesRequests: Bool = false

    /// `https` when the server answers TLS, `http` otherwise.
    public var scheme: String { tls == nil ? "http" : "https" }

    /// Creates a configuration.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, limits: Limits = Limits(),
        tombstoneHorizonSeconds: Int64 = 30 * 24 * 3600, purgeIntervalSeconds: Int64 = 3600,
        sessionLifetimeSeconds: Int64 = 14 * 24 * 3600, passwordHashCost: UInt8 = 12, publicURL: String? = nil,
        assetsDirectory: String? = nil, assetsBucket: S3Bucket? = nil, assetGraceSeconds: Int64 = 24 * 3600,
        quotas: Quotas = Quotas(),
        rateLimit: RateLimit? = nil, signInLimits: SignInLimits = SignInLimits(), trustedProxies: Set<String> = [],
        clock: ServerClock = .system,
        pushHeartbeatSeconds: Int64 = 30, pushQueueLimit: Int = 100, pushRetentionSeconds: Int64 = 3600,
        pushTokenLifetimeSeconds: Int64 = 90 * 24 * 3600, requestHeadTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(60), maxConnections: Int = 10_000, maxConnectionsPerClient: Int = 500,
        bodyPace: RequestBodyPace = RequestBodyPace(), maxBufferedRequestBytes: Int = 256 << 20, tls: TLSIdentity? = nil, metrics: ServerMetrics = ServerMetrics(),
        metricsToken: String? = nil
    ) {
        self.metrics = metrics
        self.metricsToken = metricsToken
        self.tls = tls
        self.maxBufferedRequestBytes = maxBufferedRequestBytes
        self.bodyPace = bodyPace
        self.maxConnections = maxConnections
        self.maxConnectionsPerClient = maxConnectionsPerClient
        self.requestHeadTimeout = requestHeadTimeout
        self.idleTimeout = idleTimeout
        self.rateLimit = rateLimit
        self.signInLimits = signInLimits
        self.trustedProxies = trustedProxies
        self.clock = clock
        self.pushHeartbeatSeconds = pushHeartbeatSeconds
        self.pushQueueLimit = pushQueueLimit
        self.pushRetentionSeconds = pushRetentionSeconds
        self.pushTokenLifetimeSeconds = pushTokenLifetimeSeconds
        self.assetsDirectory = assetsDirectory
        self.assetsBucket = assetsBucket
        self.assetGraceSeconds = assetGraceSeconds
        self.quotas = quotas
        self.host = host
        self.port = port
        self.limits = limits
        self.tombstoneHorizonSeconds = tombstoneHorizonSeconds
        self.purgeIntervalSeconds = purgeIntervalSeconds
        self.sessionLifetimeSeconds = sessionLifetimeSeconds
        self.passwordHashCost = passwordHashCost
        self.publicURL = publicURL
    }
}
