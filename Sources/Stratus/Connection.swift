import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import StratusModel
import Synchronization

/// A container's link to its server: one HTTP client (with its connection pool), the session, the
/// cached capabilities, and the one place requests are sent and retried.
final class Connection: Sendable {
    /// Where a request goes: an operation of the table (``Endpoints``), or a URL the server handed out.
    enum Endpoint: Sendable {
        /// An operation on one database: `/database/1/{container}/{environment}/{scope}/…`.
        case database(Database.Scope, AnyEndpoint)
        /// An operation of the environment, `/database/1/{container}/{environment}/…`, or of accounts,
        /// `/auth/1/{container}/…`, as the endpoint's base says.
        case container(AnyEndpoint)
        /// A URL the server handed out (asset uploads and downloads).
        case url(String)
    }

    /// An answer: the status and the body.
    struct Reply: Sendable {
        var status: Int
        var body: ByteBuffer
        var headers = HTTPHeaders()
    }

    let serverURL: String
    let containerIdentifier: String
    let environment: Container.Environment
    let apiToken: String
    let configuration: Container.Configuration
    /// The device this container speaks for: the configured ID, or a new one per container.
    let deviceID: String
    private let http: HTTPClient
    private let state: Mutex<(session: Container.Session?, capabilities: Capabilities?)>
    /// What the signed-in user may do in each shared zone, as the last share record the SDK read
    /// there said; lets a write the server would refuse fail without a round trip.
    private let sharePermissions = Mutex<[RecordZone.ID: SharePermission]>([:])

    /// The largest answer read into memory (a page of 200 records of up to 1 MB each fits).
    private static let maxResponseBytes = 1 << 30

    init(
        serverURL: URL, containerIdentifier: String, environment: Container.Environment, apiToken: String,
        session: Container.Session?, configuration: Container.Configuration
    ) {
        var base = serverURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        self.serverURL = base
        self.containerIdentifier = containerIdentifier
        self.environment = environment
        self.apiToken = apiToken
        self.configuration = configuration
        self.deviceID = configuration.deviceID ?? UUID().uuidString
        self.state = Mutex((session, nil))
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.timeout = .init(
            connect: .nanoseconds(configuration.connectTimeout.nanoseconds),
            read: .nanoseconds(configuration.requestTimeout.nanoseconds))
        // The SDK retries under its own policy; the pool's retries would hide a refused connection
        // until the connect timeout.
        httpConfiguration.connectionPool.retryConnectionEstablishment = false
        // The client asks for gzip (`Accept-Encoding`) and inflates answers, within the answer limit.
        httpConfiguration.decompression = .enabled(limit: .size(Self.maxResponseBytes))
        // A change feed keeps this many pages requested at once (`RecordZoneChangePages.window`).
        httpConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = RecordZoneChangePages.window
        http = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: httpConfiguration,
            backgroundActivityLogger: configuration.logger)
    }

    deinit {
        http.shutdown { _ in }
    }

    var session: Container.Session? {
        get { state.withLock { $0.session } }
        set {
            state.withLock { $0.session = newValue }
            sharePermissions.withLock { $0.removeAll() }
        }
    }

    /// Records the signed-in user's permission in a shared zone.
    func noteSharePermission(_ permission: SharePermission, zone: RecordZone.ID) {
        sharePermissions.withLock { $0[zone] = permission }
    }

    /// The signed-in user's permission in a shared zone, when known.
    func sharePermission(in zone: RecordZone.ID) -> SharePermission? {
        sharePermissions.withLock { $0[zone] }
    }

    var logger: Logger { configuration.logger }

    /// The server's capabilities, fetched once.
    func capabilities() async throws -> Capabilities {
        if let cached = state.withLock({ $0.capabilities }) { return cached }
        let capabilities = try await call(.container(Endpoints.capabilities.erased), as: Capabilities.self)
        state.withLock { $0.capabilities = capabilities }
        return capabilities
    }

    /// The server's limits.
    func limits() async throws -> Limits { try await capabilities().limits }

    // MARK: Calls

    /// A `GET` whose answer decodes as `Response`.
    func call<Response: JSONDecodable>(
        _ endpoint: Endpoint, token: String? = nil, as type: Response.Type
    ) async throws -> Response {
        let reply = try await send(.GET, endpoint, token: token, body: nil, idempotent: true)
        return try decode(Response.self, from: reply)
    }

    /// A `POST` of `body` whose answer decodes as `Response`. `idempotent` says whether sending the
    /// request twice has the same effect as once; only such requests are repeated after an answer
    /// was lost.
    func call<Response: JSONDecodable>(
        _ endpoint: Endpoint, body: some JSONWritable, idempotent: Bool, as type: Response.Type
    ) async throws -> Response {
        let reply = try await send(.POST, endpoint, body: ByteBuffer(bytes: body.jsonBytes), idempotent: idempotent)
        return try decode(Response.self, from: reply)
    }

    /// The answer's body decoded as `Response`; `serverRejectedRequest` when it cannot be.
    func decode<Response: JSONDecodable>(_ type: Response.Type, from reply: Reply) throws -> Response {
        try read(reply) { bytes in
            var reader = JSONReader(bytes: bytes)
            let value = try reader.readValue()
            try reader.expectEnd()
            return try Response(json: value)
        }
    }

    /// What `body` reads from the answer's bytes; `serverRejectedRequest` when it cannot.
    func read<Value>(_ reply: Reply, _ body: (UnsafeBufferPointer<UInt8>) throws -> Value) throws -> Value {
        do {
            return try reply.body.withUnsafeReadableBytes { try body($0.assumingMemoryBound(to: UInt8.self)) }
        } catch {
            throw CloudError(.serverRejectedRequest, "the server's answer could not be read: \(error)")
        }
    }

    /// The URL of `endpoint`, with the API token and the session's web auth token.
    func url(_ endpoint: Endpoint, token: String? = nil) -> String {
        let container = containerIdentifier.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)
            ?? containerIdentifier
        let path: String
        switch endpoint {
        case .database(let scope, let operation):
            path = "\(serverURL)/database/1/\(container)/\(environment.rawValue)/\(scope.rawValue)/\(operation.path)"
        case .container(let operation) where operation.base == .auth:
            path = "\(serverURL)/auth/1/\(container)/\(operation.path)"
        case .container(let operation) where operation.base == .device:
            path = "\(serverURL)/device/1/\(container)/\(environment.rawValue)/\(operation.path)"
        case .container(let operation):
            path = "\(serverURL)/database/1/\(container)/\(environment.rawValue)/\(operation.path)"
        case .url(let url):
            return url
        }
        var url = path + "?ckAPIToken=" + apiToken.queryValueEncoded
        // A request signed with a server-to-server key acts as the key's user, and carries no session.
        if configuration.serverToServerKey == nil, let webAuthToken = token ?? session?.webAuthToken {
            url += "&ckWebAuthToken=" + webAuthToken.queryValueEncoded
        }
        return url
    }

    /// Adds the container's tokens to a URL the server handed out (asset `downloadURL`s).
    func authorized(_ url: String) -> String {
        var url = url + (url.contains("?") ? "&" : "?") + "ckAPIToken=" + apiToken.queryValueEncoded
        if let webAuthToken = session?.webAuthToken { url += "&ckWebAuthToken=" + webAuthToken.queryValueEncoded }
        return url
    }

    // MARK: Sending and retrying

    /// Sends a request, retrying transient failures under the container's ``RetryPolicy``, and
    /// returns a 2xx answer or throws ``CloudError``.
    func send(
        _ method: HTTPMethod, _ endpoint: Endpoint, token: String? = nil, body: ByteBuffer?, headers: HTTPHeaders = [:],
        idempotent: Bool
    ) async throws -> Reply {
        // Every attempt goes with the session of the first: a retry after another account signed in
        // must not carry this request into that account's database.
        let token = token ?? session?.webAuthToken
        return try await withRetries(idempotent: idempotent, endpoint: endpoint) {
            var request = HTTPClientRequest(url: url(endpoint, token: token))
            request.method = method
            request.headers.add(contentsOf: headers)
            // Each attempt is signed anew: the server takes a signed date within five minutes.
            if let key = configuration.serverToServerKey, request.url.hasPrefix(serverURL + "/database/") {
                let subpath = String(request.url.dropFirst(serverURL.count))
                let bytes = body.map { Array($0.readableBytesView) } ?? []
                for header in try key.signingHeaders(subpath: subpath, body: bytes, date: Date()) {
                    request.headers.replaceOrAdd(name: header.name, value: header.value)
                }
            }
            if let body {
                request.body = .bytes(body)
                request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
            }
            let response = try await execute(request, transportBody: body)
            let answer = try await response.body.collect(upTo: Self.maxResponseBytes)
            return Reply(status: Int(response.status.code), body: answer, headers: response.headers)
        }
    }

    /// Runs `request` through the HTTP client, adding the device ID; through the configured
    /// ``HTTPTransport`` instead when there is one, with `transportBody` as the body (a transport
    /// takes whole bodies, not the client's streams).
    func execute(_ request: HTTPClientRequest, transportBody: ByteBuffer? = nil) async throws -> HTTPClientResponse {
        var request = request
        request.headers.replaceOrAdd(name: "X-Stratus-Device-ID", value: deviceID)
        if let transport = configuration.httpTransport {
            let answer = try await transport.send(
                HTTPTransportRequest(method: request.method, url: request.url, headers: request.headers, body: transportBody))
            return HTTPClientResponse(
                status: HTTPResponseStatus(statusCode: answer.status), headers: answer.headers, body: .bytes(answer.body))
        }
        return try await http.execute(
            request, timeout: .nanoseconds(configuration.requestTimeout.nanoseconds), logger: configuration.logger)
    }

    /// Runs `attempt` until it returns a 2xx reply, a failure that retrying cannot fix, or the
    /// policy gives up. An HTTP error answer becomes a ``CloudError``; a transport error becomes
    /// `networkUnavailable` (nothing was sent), `networkFailure` (an idempotent request whose answer
    /// was lost) or `serverResponseLost` (any other request whose answer was lost).
    func withRetries(
        idempotent: Bool, endpoint: Endpoint, _ attempt: () async throws -> Reply
    ) async throws -> Reply {
        var attempts = 0
        while true {
            attempts += 1
            let failure: CloudError
            let mayRepeat: Bool
            do {
                let reply = try await attempt()
                if (200..<300).contains(reply.status) { return reply }
                failure = Self.error(status: reply.status, body: reply.body)
                // A throttle or a refusal from Stratus means nothing was applied; a bare 5xx from a
                // proxy may have been, after the request reached the server.
                mayRepeat = failure.serverErrorCode != nil || idempotent
            } catch let error as CloudError {
                throw error
            } catch is CancellationError {
                throw CloudError(.operationCancelled, "the request was cancelled")
            } catch {
                let reachedServer = !Self.failedBeforeSending(error)
                if reachedServer && !idempotent {
                    var lost = CloudError(
                        .serverResponseLost,
                        "the connection failed after the request was sent (\(Self.describe(error))); the server may have applied "
                            + "it, so it was not repeated: fetch the affected records to find out")
                    lost.retryAfterSeconds = nil
                    throw lost
                }
                failure = CloudError(
                    reachedServer ? .networkFailure : .networkUnavailable,
                    "the server at \(serverURL) could not be reached: \(Self.describe(error))")
                mayRepeat = true
            }
            guard failure.isTransient, mayRepeat,
                let delay = configuration.retryPolicy.delay(afterAttempt: attempts, error: failure)
            else { throw failure }
            logger.info(
                "retrying after a transient failure",
                metadata: [
                    "stratus.endpoint": "\(Self.describe(endpoint))", "stratus.attempt": "\(attempts)",
                    "stratus.delay": "\(delay)", "stratus.error": "\(failure)",
                ])
            do {
                try await configuration.clock.sleep(for: delay)
            } catch {
                throw CloudError(.operationCancelled, "the request was cancelled while waiting to retry")
            }
        }
    }

    private static func describe(_ endpoint: Endpoint) -> String {
        switch endpoint {
        case .database(let scope, let operation): "\(scope.rawValue)/\(operation.path)"
        case .container(let operation): operation.path
        case .url: "asset transfer"
        }
    }

    /// A transport error in a few words: `connection refused`, `read timeout`.
    private static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        if let error = error as? HTTPClientError { return "\(error)".replacingOccurrences(of: "HTTPClientError.", with: "") }
        return "\(error)"
    }

    /// The error an HTTP error answer stands for.
    static func error(status: Int, body: ByteBuffer) -> CloudError {
        if let json = try? JSONValue.parse(Array(body.readableBytesView)),
            let wire = try? ErrorDictionary(json: json)
        {
            return CloudError(wire)
        }
        // Not a Stratus answer: a proxy or gateway.
        switch status {
        case 429: return CloudError(.requestRateLimited, "HTTP 429 without a Stratus error body")
        case 502, 503, 504: return CloudError(.serviceUnavailable, "HTTP \(status) from the server or a proxy in front of it")
        default: return CloudError(.serverRejectedRequest, "HTTP \(status) without a Stratus error body")
        }
    }

    /// Whether a transport error happened before any byte of the request left: a refused or timed
    /// out connection, an unknown host.
    static func failedBeforeSending(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError {
            return error == .connectTimeout || error == .getConnectionFromPoolTimeout
                || error == .tlsHandshakeTimeout || error == .alreadyShutdown
        }
        if error is NIOConnectionError { return true }
        if let error = error as? IOError {
            return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN].contains(error.errnoCode)
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return true }
        return false
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
