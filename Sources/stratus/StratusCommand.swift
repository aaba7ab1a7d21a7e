public import ArgumentParser
import CoreMetrics
import OTel
import Foundation
import Hummingbird
import Logging
import StratusModel
import StratusServer
import StratusPostgres
import StratusProcess
import StratusSQLite
import ServiceLifecycle
import UnixSignals
import StratusStorage

@main
struct StratusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stratus",
        abstract: "A self-hosted CloudKit: sync server and administration.",
        subcommands: [Serve.self, Admin.self, SchemaCommand.self, RecordsCommand.self, ZonesCommand.self, ChangesCommand.self])
}

/// Options naming where data lives, shared by every command that opens storage.
struct DataOptions: ParsableArguments {
    @Option(name: .long, help: "The data directory (created on first start): the SQLite file, credentials.json, assets.")
    var data: String = "./stratus-data"

    var directory: URL { URL(fileURLWithPath: data, isDirectory: true) }

    @Option(
        help: ArgumentHelp(
            "Keep data in PostgreSQL instead of DATA/stratus.sqlite: postgres://user[:password]@host[:port]/database "
                + "(?sslmode=disable|prefer|require). Also STRATUS_DATABASE. Several instances may share it."))
    var database: String?

    @Option(help: "Commit durability of the SQLite file: 'full' syncs every commit to disk, 'normal' survives process crashes only.")
    var durability: SQLiteStorage.Durability = .full

    /// The PostgreSQL URL from `--database` or `STRATUS_DATABASE`, if any.
    var databaseURL: String? {
        database ?? ProcessInfo.processInfo.environment["STRATUS_DATABASE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The most files the storage holds open: PostgreSQL's pool of connections and its listener, or
    /// the SQLite file, its log and shared memory, per connection of GRDB's pool.
    var openFilesNeeded: Int {
        databaseURL == nil ? 32 : PostgresStorage.defaultMaximumConnections + 8
    }

    /// Opens the storage: PostgreSQL when a database URL is given, else the SQLite file in the data
    /// directory. Either way its schema is brought up to date.
    ///
    /// Only `stratus serve` makes a data directory that does not exist (`creatingDirectory`): a
    /// command given a misspelt `--data` would otherwise work on a new, empty database and report
    /// success. A directory that exists, even empty, is used.
    ///
    /// Data is private to the account the server runs as: the process's umask becomes 077, so every
    /// file it writes from here on (the database, assets, uploads, exports) is `0600` and every
    /// directory `0700`, and the data directory itself is made `0700`.
    func openStorage(creatingDirectory: Bool = false) throws -> any StratusStorage {
        var isDirectory: ObjCBool = false
        if !creatingDirectory, databaseURL == nil,
            !FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) || !isDirectory.boolValue
        {
            throw ValidationError(
                "--data \(data): there is no such folder. Give the folder `stratus serve` keeps its data in (it makes it on "
                    + "first start), or make the folder first (mkdir) to start a new one.")
        }
        umask(0o077)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        if let databaseURL {
            return try PostgresStorage(url: databaseURL)
        }
        return try SQLiteStorage(
            path: directory.appendingPathComponent("stratus.sqlite").path,
            configuration: .init(durability: durability))
    }
}

extension DataOptions {
    /// Opens the storage, runs it while `body` uses it, and stops it afterwards. With `audited`, the
    /// command (`action`, without secrets) goes into the audit log beside the admin API's requests,
    /// by the command line's user, with the status an HTTP request would have ended with.
    func withStorage<T>(audited action: String? = nil, _ body: (any StratusStorage) async throws -> T) async throws -> T {
        let storage = try openStorage()
        return try await storage.whileRunning {
            guard let action else { return try await body(storage) }
            func audit(_ status: Int) async throws {
                try await storage.appendAuditEntry(
                    AuditEntry(
                        time: Timestamp.now.milliseconds, actor: "command line (uid \(getuid()))",
                        action: "stratus \(action)", status: status))
            }
            let result: T
            do {
                result = try await body(storage)
            } catch {
                try? await audit((error as? StratusError)?.code.httpStatus ?? 500)
                throw error
            }
            // The command did its work: a failure to log it is said, not taken for the command's.
            do {
                try await audit(200)
            } catch {
                FileHandle.standardError.write(Data("warning: the audit log was not written: \(error)\n".utf8))
            }
            return result
        }
    }
}

extension SQLiteStorage.Durability: ExpressibleByArgument {}
extension ContainerEnvironment: ExpressibleByArgument {}

extension ServerLogHandler.Format: ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server. On first start it creates the data directory, a default container, an API "
            + "token and the admin token, and writes them to DATA/credentials.json.")

    @OptionGroup var storageOptions: DataOptions

    @Option(
        help: ArgumentHelp(
            "Where asset bytes live (default DATA/assets): a directory, which instances sharing a database must share, "
                + "or an S3-compatible bucket, s3://bucket[/prefix], with --s3-endpoint and the keys."))
    var assets: String?

    @Option(help: "The S3-compatible endpoint of an s3:// --assets bucket, e.g. https://s3.eu-west-1.amazonaws.com.")
    var s3Endpoint: String?

    @Option(help: "The region requests to the bucket are signed for.")
    var s3Region: String = "us-east-1"

    @Option(help: "The bucket's access key ID (also STRATUS_S3_ACCESS_KEY).")
    var s3AccessKey: String?

    @Option(help: "The bucket's secret access key (prefer STRATUS_S3_SECRET_KEY, which keeps it out of the process list).")
    var s3SecretKey: String?

    /// The bucket of an `s3://` `--assets`, or `nil` for a directory.
    func assetsBucket() throws -> S3Bucket? {
        guard let assets, assets.hasPrefix("s3://") else { return nil }
        let environment = ProcessInfo.processInfo.environment
        guard let endpoint = s3Endpoint else { throw ValidationError("--assets \(assets) needs --s3-endpoint") }
        guard let accessKey = s3AccessKey ?? environment["STRATUS_S3_ACCESS_KEY"],
            let secretKey = s3SecretKey ?? environment["STRATUS_S3_SECRET_KEY"]
        else { throw ValidationError("--assets \(assets) needs --s3-access-key and --s3-secret-key (or STRATUS_S3_ACCESS_KEY and STRATUS_S3_SECRET_KEY)") }
        guard let bucket = S3Bucket(
            url: assets, endpoint: endpoint, region: s3Region, accessKeyID: accessKey, secretAccessKey: secretKey)
        else {
            throw ValidationError(
                "--assets must be a directory or s3://bucket[/prefix] (bucket: lowercase letters, digits, dots, hyphens) "
                    + "and --s3-endpoint an http(s) URL")
        }
        return bucket
    }

    @Option(help: "The interface to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The port to listen on (0 picks a free one).")
    var port: Int = 8080

    @Option(help: "The URL clients reach the server at, for sign-in redirects (default: from each request).")
    var publicURL: String?

    @Option(help: "Days to keep tombstones of deleted records and zones; older sync tokens expire.")
    var tombstoneHorizonDays: Int = 30

    @Option(help: "Days a web auth token stays valid.")
    var sessionLifetimeDays: Int = 14

    @Option(help: "Operations per records/modify or zones/modify request.")
    var maxOperationsPerRequest = Limits().maxOperationsPerRequest

    @Option(help: "Records per response page (the cap of resultsLimit).")
    var maxRecordsPerResponse = Limits().maxRecordsPerResponse

    @Option(help: "Bytes of one record's fields as JSON, assets excluded.")
    var maxRecordSizeBytes = Limits().maxRecordSizeBytes

    @Option(help: "Characters in record, zone and field names.")
    var maxNameLength = Limits().maxNameLength

    @Option(help: "Fields in one record.")
    var maxFieldsPerRecord = Limits().maxFieldsPerRecord

    @Option(help: "Bytes of one asset file.")
    var maxAssetSizeBytes = Limits().maxAssetSizeBytes

    @Option(help: "Hours an uploaded asset is kept while no record refers to it.")
    var assetGraceHours = 24

    @Option(help: "Bytes in one request body (default: enough for a full batch of maximum-size records, up to 64 MiB).")
    var maxRequestBodyBytes: Int?

    @Option(
        help: ArgumentHelp(
            "Requests per second each caller (signed-in user, else the app from one client address) may make; "
                + "unlimited when absent. Sign-in and sign-up have limits of their own either way."))
    var rateLimit: Double?

    @Option(help: "Requests a caller may make at once before --rate-limit applies (default: one second's worth).")
    var rateLimitBurst: Int?

    @Option(
        name: .customLong("trusted-proxy"),
        help: ArgumentHelp(
            "The address of a reverse proxy in front of the server (repeat for several): its requests are counted "
                + "against the client address it forwards in X-Forwarded-For."))
    var trustedProxies: [String] = []

    @Option(help: "Seconds between heartbeat pings on push connections; one left unanswered closes the connection.")
    var pushHeartbeatSeconds = 30

    @Option(help: "Notifications kept waiting per device (coalesced per subscription and zone); more drop the oldest.")
    var pushQueueLimit = 100

    @Option(help: "Minutes a disconnected device keeps its waiting notifications.")
    var pushRetentionMinutes = 60

    @Option(
        help: ArgumentHelp(
            "Push endpoints (APNs, FCM, Web Push registrations) one user keeps; registering one more forgets the least "
                + "recently registered."))
    var pushEndpointsPerUser = PushServiceConfiguration().endpointsPerUser

    @Option(help: "The APNs server device pushes go to in both environments (a relay or a stand-in); Apple's own by default.")
    var apnsEndpoint: String?

    @Option(help: "The FCM HTTP v1 server messages go to (a relay or a stand-in); https://fcm.googleapis.com by default.")
    var fcmEndpoint: String?

    @Option(help: "A PEM file of CA certificates trusted for the push services besides the system's.")
    var pushCAFile: String?

    @Option(
        name: .customLong("web-push-host"),
        help: ArgumentHelp(
            "A host Web Push subscriptions may point at, with its subdomains (repeat for several); by default the "
                + "browsers' services: fcm.googleapis.com, push.services.mozilla.com, push.apple.com, notify.windows.com."))
    var webPushHosts: [String] = []

    @Option(help: "Seconds a new connection has to send its first request's head before it is closed.")
    var requestHeadTimeoutSeconds = 10

    @Option(help: "Seconds a connection may stay open between requests (a request in progress is never cut).")
    var idleTimeoutSeconds = 60

    @Option(
        help: ArgumentHelp(
            "The most connections held at once; more are answered 503 and closed (by default 10,000, or as many as the "
                + "open-file limit holds at 2 files each beside the storage's and a reserve of 128). A value the limit "
                + "cannot hold stops the start, naming the numbers."))
    var maxConnections: Int?

    @Option(help: "The most connections one client address holds at once (trusted proxies are not limited).")
    var maxConnectionsPerClient = 500

    @Option(help: "Records one user may hold (their private database, and what they created in the public one); 'none' for no limit.")
    var userQuotaRecords = QuotaLimit(10_000_000)

    @Option(help: "Bytes of records one user may hold, e.g. 10GiB; 'none' for no limit.")
    var userQuotaRecordBytes = QuotaLimit(10 << 30)

    @Option(help: "Bytes of assets one user's records may hold, e.g. 20GiB; 'none' for no limit.")
    var userQuotaAssetBytes = QuotaLimit(20 << 30)

    @Option(
        help: ArgumentHelp(
            "Bytes one user may have uploaded, within --asset-grace-hours, that no record holds yet, e.g. 1GiB; 'none' "
                + "for no limit."))
    var userQuotaUploadBytes = QuotaLimit(1 << 30)

    @Option(help: "Records one container may hold in all; 'none' (the default) for no limit.")
    var containerQuotaRecords = QuotaLimit(nil)

    @Option(help: "Bytes of records one container may hold in all; 'none' (the default) for no limit.")
    var containerQuotaRecordBytes = QuotaLimit(nil)

    @Option(help: "Bytes of assets one container's records may hold in all; 'none' (the default) for no limit.")
    var containerQuotaAssetBytes = QuotaLimit(nil)

    @Option(help: "Seconds a request body may take to arrive, counted while the server waits for the client.")
    var bodyTimeoutSeconds = 900

    @Option(help: "Seconds a request body may take before its pace is checked.")
    var bodyGraceSeconds = 10

    @Option(
        help: ArgumentHelp(
            "The slowest average pace of a request body after its grace period, in bytes per second; a slower "
                + "body's connection is closed."))
    var bodyMinBytesPerSecond = 1024

    @Option(
        help: ArgumentHelp(
            "Requests one client address (an IPv6 /64) may have sending their bodies at once; more are answered 503 "
                + "(trusted proxies are not limited)."))
    var maxBodiesPerClient = 64

    @Option(
        help: ArgumentHelp(
            "Request bytes held in memory at once, over all requests (at least --max-request-body-bytes); "
                + "a body that does not fit is answered 503 with Retry-After."))
    var maxBufferedRequestBytes = 256 << 20

    @Option(help: "A PEM file with the server's TLS certificate (and intermediates): the server then answers HTTPS only.")
    var tlsCert: String?

    @Option(help: "The PEM file of the private key of --tls-cert.")
    var tlsKey: String?

    @Option(
        help: ArgumentHelp(
            "A token that may read GET /metrics besides the admin token (prefer STRATUS_METRICS_TOKEN, which keeps it "
                + "out of the process list)."))
    var metricsToken: String?

    @Flag(
        help: ArgumentHelp(
            "Export a trace span of every request over OpenTelemetry (OTLP/HTTP), configured by the standard OTEL_* "
                + "variables (OTEL_EXPORTER_OTLP_ENDPOINT, by default http://localhost:4318)."))
    var otel = false

    @Option(help: "Log format.")
    var logFormat: ServerLogHandler.Format = .text

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func validate() throws {
        for (name, value) in [
            ("--max-operations-per-request", maxOperationsPerRequest), ("--max-records-per-response", maxRecordsPerResponse),
            ("--max-record-size-bytes", maxRecordSizeBytes), ("--max-name-length", maxNameLength),
            ("--max-fields-per-record", maxFieldsPerRecord), ("--max-request-body-bytes", maxRequestBodyBytes ?? 1),
            ("--tombstone-horizon-days", tombstoneHorizonDays), ("--session-lifetime-days", sessionLifetimeDays),
            ("--push-heartbeat-seconds", pushHeartbeatSeconds), ("--push-queue-limit", pushQueueLimit),
            ("--push-endpoints-per-user", pushEndpointsPerUser),
            ("--push-retention-minutes", pushRetentionMinutes),
            ("--request-head-timeout-seconds", requestHeadTimeoutSeconds), ("--idle-timeout-seconds", idleTimeoutSeconds),
            ("--max-connections", maxConnections ?? 1), ("--max-connections-per-client", maxConnectionsPerClient),
            ("--max-buffered-request-bytes", maxBufferedRequestBytes), ("--body-timeout-seconds", bodyTimeoutSeconds),
            ("--body-min-bytes-per-second", bodyMinBytesPerSecond), ("--max-bodies-per-client", maxBodiesPerClient),
        ] where value < 1 {
            throw ValidationError("\(name) must be at least 1, not \(value)")
        }
        guard bodyGraceSeconds >= 0 else { throw ValidationError("--body-grace-seconds must be at least 0, not \(bodyGraceSeconds)") }
        if let rateLimit, !(rateLimit > 0) {
            throw ValidationError("--rate-limit must be more than 0 requests per second, not \(rateLimit)")
        }
        if let rateLimitBurst {
            guard rateLimit != nil else { throw ValidationError("--rate-limit-burst needs --rate-limit") }
            guard rateLimitBurst >= 1 else { throw ValidationError("--rate-limit-burst must be at least 1, not \(rateLimitBurst)") }
        }
        for (name, value) in [("--apns-endpoint", apnsEndpoint), ("--fcm-endpoint", fcmEndpoint)] {
            if let value, URLComponents(string: value)?.scheme != "https" {
                throw ValidationError("\(name) must be an https URL, not '\(value)'")
            }
        }
        if let pushCAFile, !FileManager.default.isReadableFile(atPath: pushCAFile) {
            throw ValidationError("--push-ca-file: cannot read \(pushCAFile)")
        }
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together: give both, or neither")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let format = logFormat
        LoggingSystem.bootstrap { label in
            var handler = ServerLogHandler(label: label, format: format)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "stratus")
        AllocatorSettings.keepFreedMemoryForReuse()
        let connectionCap = try OpenFileLimit.connectionCap(
            requested: maxConnections, limit: OpenFileLimit.raise(), storageFiles: storageOptions.openFilesNeeded,
            logger: logger)
        let limits = Limits(
            maxOperationsPerRequest: maxOperationsPerRequest, maxRecordsPerResponse: maxRecordsPerResponse,
            maxRecordSizeBytes: maxRecordSizeBytes, maxNameLength: maxNameLength, maxFieldsPerRecord: maxFieldsPerRecord,
            maxAssetSizeBytes: maxAssetSizeBytes, maxRequestBodyBytes: maxRequestBodyBytes)
        var serverConfiguration = ServerConfiguration(
            host: host, port: port, limits: limits, tombstoneHorizonSeconds: Int64(tombstoneHorizonDays) * 86_400,
            sessionLifetimeSeconds: Int64(sessionLifetimeDays) * 86_400, publicURL: publicURL,
            assetsDirectory: assets.flatMap { $0.hasPrefix("s3://") ? nil : $0 }
                ?? storageOptions.directory.appendingPathComponent("assets").path,
            assetsBucket: try assetsBucket(),
            assetGraceSeconds: Int64(assetGraceHours) * 3600,
            quotas: Quotas(
                perUser: StorageQuota(
                    records: userQuotaRecords.value, recordBytes: userQuotaRecordBytes.value,
                    assetBytes: userQuotaAssetBytes.value),
                perUserPendingUploadBytes: userQuotaUploadBytes.value,
                perContainer: StorageQuota(
                    records: containerQuotaRecords.value, recordBytes: containerQuotaRecordBytes.value,
                    assetBytes: containerQuotaAssetBytes.value)),
            rateLimit: rateLimit.map { RateLimit(requestsPerSecond: $0, burst: rateLimitBurst) },
            trustedProxies: Set(trustedProxies),
            pushHeartbeatSeconds: Int64(pushHeartbeatSeconds), pushQueueLimit: pushQueueLimit,
            pushRetentionSeconds: Int64(pushRetentionMinutes) * 60,
            requestHeadTimeout: .seconds(requestHeadTimeoutSeconds), idleTimeout: .seconds(idleTimeoutSeconds),
            maxConnections: connectionCap, maxConnectionsPerClient: maxConnectionsPerClient,
            bodyPace: RequestBodyPace(
                timeout: .seconds(bodyTimeoutSeconds), gracePeriod: .seconds(bodyGraceSeconds),
                minimumBytesPerSecond: bodyMinBytesPerSecond, maxBodiesPerClient: maxBodiesPerClient),
            maxBufferedRequestBytes: maxBufferedRequestBytes,
            tls: tlsCert.flatMap { cert in tlsKey.map { TLSIdentity(certificateChainPath: cert, privateKeyPath: $0) } },
            metricsToken: metricsToken ?? ProcessInfo.processInfo.environment["STRATUS_METRICS_TOKEN"])
        if let apnsEndpoint {
            serverConfiguration.pushServices.apnsDevelopmentURL = apnsEndpoint
            serverConfiguration.pushServices.apnsProductionURL = apnsEndpoint
        }
        if let fcmEndpoint { serverConfiguration.pushServices.fcmURL = fcmEndpoint }
        serverConfiguration.pushServices.trustedCertificatesFile = pushCAFile
        if !webPushHosts.isEmpty { serverConfiguration.pushServices.webPushHosts = webPushHosts }
        serverConfiguration.pushServices.endpointsPerUser = pushEndpointsPerUser
        // Libraries' own metrics go to the same registry as the server's.
        MetricsSystem.bootstrap(serverConfiguration.metrics.factory)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if otel {
            // Traces only: metrics stay with /metrics, logs with the log handler above.
            var telemetry = OTel.Configuration.default
            telemetry.serviceName = "stratus"
            telemetry.metrics.enabled = false
            telemetry.logs.enabled = false
            services.append(.init(service: try OTel.bootstrap(configuration: telemetry)))
            serverConfiguration.tracesRequests = true
        }
        let configuration = serverConfiguration
        let storage = try storageOptions.openStorage(creatingDirectory: true)
        let credentialsFile = storageOptions.directory.appendingPathComponent("credentials.json")
        let host = host
        let server = StratusServerService(
            storage: storage, configuration: configuration, credentialsFile: credentialsFile, logger: logger
        ) { started in
            let url = "\(configuration.scheme)://\(host):\(started.port)"
            var lines = [
                "Stratus is running at \(url)", "  OpenAPI:     \(url)/openapi.json",
                "  metrics:     \(url)/metrics (Authorization: Bearer <admin or metrics token>)",
            ]
            if var credentials = started.bootstrap?.credentials {
                credentials.url = url
                try? ServerBootstrap.write(credentials, to: credentialsFile)
            }
            if started.bootstrap?.created == true, let credentials = started.bootstrap?.credentials {
                // Printed once, when they are made; the file keeps them (mode 0600).
                lines += [
                    "  container:   \(credentials.container)",
                    "  API token:   \(credentials.apiToken)",
                    "  admin token: \(credentials.adminToken)",
                    "  saved in:    \(credentialsFile.path) (readable by this account only)",
                ]
            } else if started.bootstrap?.credentials != nil {
                lines.append("  credentials: \(credentialsFile.path) (the API and admin tokens made on first start)")
            } else {
                lines.append("  (credentials.json is gone; create tokens with 'stratus admin create-token')")
            }
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        // The storage starts first and stops last: the group shuts services down in reverse order.
        try await ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services + [.init(service: storage), .init(service: server)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger)
        ).run()
    }
}

struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage containers, API tokens and users directly in the data directory.",
        subcommands: [
            CreateContainer.self, CreateToken.self, CreateUser.self, ListUsers.self, DisableUser.self, EnableUser.self,
            ResetPassword.self, CreateKey.self, RevokeKey.self, ListKeys.self,
            ListContainers.self, Migrate.self, Export.self, Import.self, SetAPNs.self, SetFCM.self,
            CreateWebPushKey.self, PushStatus.self, RemovePush.self,
        ] + signInCommands)

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the storage's schema up to date (servers also do this on start) and print its version.")
        @OptionGroup var storageOptions: DataOptions

        func run() async throws {
            let status = try await storageOptions.withStorage { try await $0.migrationStatus() }
            let where_ = storageOptions.databaseURL == nil
                ? "SQLite (\(storageOptions.directory.appendingPathComponent("stratus.sqlite").path))" : "PostgreSQL"
            print("\(where_) schema: \(status.applied.joined(separator: ", ")) applied; the latest is \(status.latest)")
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a container (accounts, schemas, zones, records, subscriptions) as NDJSON, to move it "
                + "between SQLite and PostgreSQL. Progress goes to standard error.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "The file to write ('-' for standard output); it appears, readable by its owner only, when the export is complete.")
        var output: String = "-"

        func run() async throws {
            // The export holds password and token hashes: its file is the owner's alone from the
            // start, and replaces an earlier file of that name only once it is whole.
            let partial = output == "-" ? nil : output + ".partial-\(UUID().uuidString)"
            let file: FileHandle
            if let partial {
                guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]),
                    let handle = FileHandle(forWritingAtPath: partial)
                else { throw ValidationError("--output: cannot write \(output)") }
                file = handle
            } else {
                file = .standardOutput
            }
            do {
                var buffer: [UInt8] = []
                let counts = try await storageOptions.withStorage(audited: "admin export \(container)") { storage in
                    try await ContainerTransfer.export(
                    container: container, from: storage,
                    write: { line in
                        buffer += line
                        if buffer.count > 1 << 20 {
                            try file.write(contentsOf: buffer)
                            buffer.removeAll(keepingCapacity: true)
                        }
                    },
                    progress: { Self.report("exported", $0) })
                }
                try file.write(contentsOf: buffer)
                if partial != nil {
                    try file.synchronize()
                    try file.close()
                }
                if let partial, rename(partial, output) != 0 {
                    throw ValidationError("--output: cannot write \(output): \(String(cString: strerror(errno)))")
                }
                Self.report("exported", counts, done: true)
            } catch {
                if let partial { try? FileManager.default.removeItem(atPath: partial) }
                throw error
            }
        }

        static func report(_ verb: String, _ counts: ContainerTransfer.Counts, done: Bool = false) {
            FileHandle.standardError.write(
                Data("\(done ? "done: " : "")\(verb) \(counts.records) records (\(counts.lines) lines)\n".utf8))
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read a container written by 'admin export' into this storage, which must not have it yet.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The export file ('-' reads standard input).")
        var file: String

        func run() async throws {
            guard let input = file == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            let counts = try await storageOptions.withStorage(audited: "admin import") { storage in
                try await ContainerTransfer.importLines(
                    NDJSONLines(input), into: storage, now: Timestamp.now.milliseconds,
                    progress: { Export.report("imported", $0) })
            }
            Export.report("imported", counts, done: true)
        }
    }

    struct CreateContainer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a container and print its first API token.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier, e.g. iCloud.com.example.notes.")
        var identifier: String
        @Flag(help: "Allow only accounts created by an admin (no self sign-up).")
        var noSignUp = false

        func run() async throws {
            try await storageOptions.withStorage(audited: "admin create-container \(identifier)") { storage in
                let accounts = AccountService(storage: storage, configuration: .init())
                try await accounts.createContainer(identifier, allowsSignUp: !noSignUp)
                print("container: \(identifier)\nAPI token: \(try await accounts.createAPIToken(container: identifier))")
            }
        }
    }

    struct CreateToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an API token for a container.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "A name to remember the token by.")
        var name: String = "default"

        func run() async throws {
            try await storageOptions.withStorage(audited: "admin create-token \(container)") { storage in
                let accounts = AccountService(storage: storage, configuration: .init())
                print(try await accounts.createAPIToken(container: container, name: name))
            }
        }
    }

    struct CreateUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user account; the password is read from standard input unless given.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "The username.")
        var username: String
        @Option(help: "The password (prefer standard input, which keeps it out of the shell history).")
        var password: String?

        func run() async throws {
            guard let password = password ?? readLine(strippingNewline: true) else {
                throw ValidationError("give a password with --password or on standard input")
            }
            try await storageOptions.withStorage(audited: "admin create-user \(container) \(username)") { storage in
                let accounts = AccountService(storage: storage, configuration: .init())
                let user = try await accounts.createUser(container: container, username: username, password: password)
                print("user: \(user.username)\nuserRecordName: \(user.recordName)")
            }
        }
    }

    struct ListUsers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-users",
            abstract: "List a container's users: username, record name, e-mail address, created, disabled (times in UTC).")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            let users = try await storageOptions.withStorage { storage in
                try await storage.requireContainer(container)
                return try await storage.users(container: container)
            }
            func time(_ milliseconds: Int64) -> String {
                Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
            }
            // Server-to-server keys' own users are no one's accounts.
            for user in users.filter({ !$0.username.hasPrefix("server-key:") }).sorted(by: { $0.username < $1.username }) {
                let disabled = user.disabledAt.map { "disabled \(time($0))" } ?? "active"
                print([user.username, user.recordName, user.emailAddress ?? "-", time(user.createdAt), disabled].joined(separator: "\t"))
            }
        }
    }

    /// The options naming one user: the container and the username (or record name).
    struct UserOptions: ParsableArguments {
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "The username, or the user's record name (_…).")
        var user: String

        /// The user's record name; `NOT_FOUND` naming the user when the container has no such one.
        func recordName(in storage: any StratusStorage) async throws -> String {
            try await storage.requireContainer(container)
            let found =
                user.hasPrefix("_")
                ? try await storage.user(container: container, recordName: user)
                : try await storage.user(container: container, username: user)
            guard let found else { throw StratusError(.notFound, "container '\(container)' has no user '\(user)'") }
            return found.recordName
        }

        /// Runs `change` on the user (by record name) with the account rules, audited as
        /// `stratus admin <command> <container> <user>`.
        func change(
            _ command: String, in storageOptions: DataOptions,
            _ change: (_ accounts: AccountService, _ recordName: String) async throws -> Void
        ) async throws {
            try await storageOptions.withStorage(audited: "admin \(command) \(container) \(user)") { storage in
                try await change(AccountService(storage: storage, configuration: .init()), try await recordName(in: storage))
            }
        }
    }

    struct DisableUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "disable-user",
            abstract: "Disable a user: they cannot sign in, and their sessions and push tokens end.",
            discussion: "A running server refuses the user's sessions within 10 seconds (its cache of sessions).")
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions

        func run() async throws {
            try await userOptions.change("disable-user", in: storageOptions) { accounts, recordName in
                try await accounts.setDisabled(true, container: userOptions.container, recordName: recordName)
                print("disabled \(userOptions.user) (\(recordName))")
            }
        }
    }

    struct EnableUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "enable-user", abstract: "Enable a disabled user again; they sign in anew.")
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions

        func run() async throws {
            try await userOptions.change("enable-user", in: storageOptions) { accounts, recordName in
                try await accounts.setDisabled(false, container: userOptions.container, recordName: recordName)
                print("enabled \(userOptions.user) (\(recordName))")
            }
        }
    }

    struct ResetPassword: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-password",
            abstract: "Set a user's password (read from standard input unless given); their sessions end.")
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions
        @Option(help: "The new password (prefer standard input, which keeps it out of the shell history).")
        var password: String?

        func run() async throws {
            guard let password = password ?? readLine(strippingNewline: true) else {
                throw ValidationError("give the new password with --password or on standard input")
            }
            try await userOptions.change("reset-password", in: storageOptions) { accounts, recordName in
                try await accounts.resetPassword(password, container: userOptions.container, recordName: recordName)
                print("password set for \(userOptions.user) (\(recordName)); their sessions ended")
            }
        }
    }

    struct CreateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a server-to-server key (an ECDSA P-256 public key in PEM) and print its key ID.",
            discussion: """
                Make a key pair with 'openssl ecparam -name prime256v1 -genkey -noout -out key.pem' and its public \
                half with 'openssl ec -in key.pem -pubout -out public.pem'; keep key.pem on the server that signs.
                """)
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "The environment the key opens: development or production.")
        var environment: ContainerEnvironment = .development
        @Option(help: "The PEM file of the public key ('-' reads standard input).")
        var publicKey: String

        func run() async throws {
            let pem = publicKey == "-"
                ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                : try String(contentsOfFile: publicKey, encoding: .utf8)
            try await storageOptions.withStorage(audited: "admin create-key \(container) \(environment.rawValue)") { storage in
                let accounts = AccountService(storage: storage, configuration: .init())
                let key = try await accounts.registerServerKey(
                    container: container, environment: environment, publicKeyPEM: pem)
                print("key ID: \(key.keyID)\nenvironment: \(key.environment.rawValue)\nuserRecordName: \(key.userRecordName)")
            }
        }
    }

    struct RevokeKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a server-to-server key.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "The key ID.")
        var keyID: String

        func run() async throws {
            try await storageOptions.withStorage(audited: "admin revoke-key \(container) \(keyID)") { storage in
                guard try await storage.revokeServerKey(id: keyID, container: container, at: Timestamp.now.milliseconds) else {
                    throw StratusError(.notFound, "container '\(container)' has no key '\(keyID)'")
                }
            }
            print("revoked \(keyID)")
        }
    }

    struct ListKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-keys", abstract: "List a container's server-to-server keys.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            for key in try await storageOptions.withStorage({ try await $0.serverKeys(container: container) }) {
                print("\(key.keyID)\t\(key.environment.rawValue)\t\(key.revokedAt == nil ? "active" : "revoked")")
            }
        }
    }

    struct SetAPNs: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-apns",
            abstract: "Set the APNs token-signing key a container's device pushes go out with, for one APNs environment.",
            discussion: """
                Make the key in the Apple developer account (Certificates, Identifiers & Profiles → Keys, with \
                Apple Push Notification service) and download its .p8 file once. Its key is never printed again.
                """)
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "development (the APNs sandbox, for development builds) or production (TestFlight, the App Store).")
        var environment: ContainerEnvironment = .production
        @Option(help: "The developer team ID (ten letters and digits).")
        var teamID: String
        @Option(help: "The key's ID (ten letters and digits).")
        var keyID: String
        @Option(help: "The .p8 key file.")
        var keyFile: String
        @Option(help: "The app's bundle ID.")
        var topic: String

        func run() async throws {
            let key = try String(contentsOfFile: keyFile, encoding: .utf8)
            let body = JSONValue.object([
                "teamID": .string(teamID), "keyID": .string(keyID), "privateKey": .string(key), "topic": .string(topic),
            ])
            try await PushCommands.update(container, storageOptions, "admin set-apns \(container) \(environment.rawValue)") {
                let apns = try PushCredentials.apns(json: body, at: Timestamp.now.milliseconds)
                if environment == .production { $0.apnsProduction = apns } else { $0.apnsDevelopment = apns }
            }
        }
    }

    struct SetFCM: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-fcm",
            abstract: "Set the Firebase service account (its JSON key file) a container's FCM messages go out with.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "The service account's JSON key file, as Firebase's console downloads it.")
        var serviceAccount: String

        func run() async throws {
            let json = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: serviceAccount))))
            try await PushCommands.update(container, storageOptions, "admin set-fcm \(container)") {
                $0.fcm = try PushCredentials.fcm(json: json, at: Timestamp.now.milliseconds)
            }
        }
    }

    struct CreateWebPushKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create-web-push-key",
            abstract: "Make a new VAPID key pair for a container's Web Push and print its public key.",
            discussion: "Web apps subscribe with the public key (tokens/create answers it); subscriptions made with an earlier key end.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "A mailto: or https: URL the push services may contact you at.")
        var subject: String

        func run() async throws {
            let body = JSONValue.object(["subject": .string(subject)])
            try await PushCommands.update(container, storageOptions, "admin create-web-push-key \(container)") {
                $0.webPush = try PushCredentials.webPush(json: body, at: Timestamp.now.milliseconds)
            }
        }
    }

    struct PushStatus: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push-status", abstract: "Print a container's push credentials (never their private keys).")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            try await PushCommands.update(container, storageOptions, nil) { _ in }
        }
    }

    struct RemovePush: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-push", abstract: "Forget a container's credentials of one push channel.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "apns-development, apns-production, fcm or webpush.")
        var channel: String

        func run() async throws {
            guard let channel = PushEndpointInfo.Channel(rawValue: channel) else {
                throw ValidationError("the channel must be apns-development, apns-production, fcm or webpush, not '\(channel)'")
            }
            try await PushCommands.update(container, storageOptions, "admin remove-push \(container) \(channel.rawValue)") {
                $0.remove(channel)
            }
        }
    }

    struct ListContainers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list-containers", abstract: "List containers.")
        @OptionGroup var storageOptions: DataOptions

        func run() async throws {
            for container in try await storageOptions.withStorage({ try await $0.containers() }) {
                print("\(container.identifier)\tsign-up: \(container.allowsSignUp ? "open" : "admin only")")
            }
        }
    }
}

struct SchemaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Export, import, deploy and reset a container's schema (CloudKit schema language).",
        subcommands: [Export.self, Import.self, Deploy.self, Reset.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print an environment's schema.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "development or production.")
        var environment: String = "development"

        func run() async throws {
            guard let environment = ContainerEnvironment(rawValue: environment) else {
                throw ValidationError("--environment must be development or production")
            }
            let text = try await storageOptions.withStorage { storage in
                try await SchemaAdministration(storage: storage).export(container: container, environment: environment).text
            }
            print(text, terminator: "")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace development's schema with a schema file ('-' reads standard input).")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "The schema file.")
        var file: String

        func run() async throws {
            let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile()
                : try Data(contentsOf: URL(fileURLWithPath: file))
            let schema = try SchemaAdministration.parse(String(decoding: data, as: UTF8.self))
            let imported = try await storageOptions.withStorage(audited: "schema import \(container)") { storage in
                try await SchemaAdministration(storage: storage).importSchema(schema, container: container)
            }
            print("imported \(imported.recordTypes.count) record types into development")
        }
    }

    struct Deploy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy development's schema to production; refused unless it only adds.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            let deployed = try await storageOptions.withStorage(audited: "schema deploy \(container)") { storage in
                try await SchemaAdministration(storage: storage).deploy(container: container)
            }
            print("production now has \(deployed.recordTypes.count) record types")
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete development's records and zones and revert its schema to production's.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            try await storageOptions.withStorage(audited: "schema reset \(container)") { storage in
                try await SchemaAdministration(storage: storage).resetDevelopment(container: container)
            }
            print("development of \(container) is reset to production's schema")
        }
    }
}

/// The lines of a file, read in chunks.
struct NDJSONLines: Sequence, IteratorProtocol {
    let handle: FileHandle
    var buffer: [UInt8] = []
    var start = 0
    var finished = false

    init(_ handle: FileHandle) { self.handle = handle }

    mutating func next() -> [UInt8]? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                defer { start = newline + 1 }
                return Array(buffer[start..<newline])
            }
            if finished {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return Array(buffer[start...])
            }
            buffer.removeFirst(start)
            start = 0
            let chunk = (try? handle.read(upToCount: 1 << 20)) ?? nil
            if let chunk, !chunk.isEmpty { buffer += chunk } else { finished = true }
        }
    }
}

/// What the push subcommands of `stratus admin` share: a change to a container's push credentials,
/// then what they are, as the admin API shows them.
enum PushCommands {
    static func update(
        _ container: String, _ storageOptions: DataOptions, _ audit: String?,
        _ change: @escaping @Sendable (inout PushCredentials) throws -> Void
    ) async throws {
        let body: @Sendable (any StratusStorage) async throws -> String = { storage in
            guard try await storage.container(container) != nil else {
                throw StratusError(.notFound, "container '\(container)' does not exist")
            }
            let store = PushCredentialStore(storage: storage, clock: .system)
            let credentials = try await store.update(container: container, change)
            var writer = JSONWriter()
            credentials.summary(to: &writer, health: [:])
            return String(decoding: writer.bytes, as: UTF8.self)
        }
        print(try await storageOptions.withStorage(audited: audit, body))
    }
}
